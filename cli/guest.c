// SPDX-License-Identifier: MIT
// Wiring a guest: the VMM, the guestinfo session of its kernel, and the sampler riding on the
// VMM's exits (with no counter for `run`: it still watches the KASLR slide and gives the PVM
// fix-up its #PF entry).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "cli.h"

int guest_start(const struct guest_opts *g, const struct sampler_config *scfg, int console_fd,
		struct guest *out)
{
	unsigned int errors_before = cli_errors_printed();
	struct vmm_config cfg;
	int err;

	memset(out, 0, sizeof(*out));
	memset(&cfg, 0, sizeof(cfg));
	guest_opts_to_config(g, &cfg);
	cfg.console_fd = console_fd;
	cfg.cmd_channel = g->cmd_out_fd >= 0;
	cfg.cmd_out_fd = g->cmd_out_fd;
	if (scfg->sample_hz && !g->vmlinux) {
		cli_error("sampling needs the guest kernel's vmlinux (symbols and BTF)");
		return -EINVAL;
	}
	/* what the guest needs on this host (PVM), said once, and kept for the recording */
	err = vmm_guest_cmdline(cfg.cmdline, cfg.cpus, vmm_host_is_pvm(), &out->cmdline,
				&out->host_added);
	if (err)
		goto fail;
	if (out->host_added[0])
		fprintf(stderr, "hvprof: note: PVM host: added to the guest's command line what a "
			"Linux guest needs here: %s\n", out->host_added);
	cfg.cmdline = out->cmdline;
	err = vmm_create(&cfg, &out->vm);
	if (err)
		goto fail;
	vmm_set_confined(out->vm, !g->no_seccomp);
	if (g->vmlinux) {
		struct gi_config gc = { .vmlinux = g->vmlinux, .btf = g->btf };
		unsigned int errors_before_gi = cli_errors_printed();

		err = gi_open(&gc, &out->gi);
		if (err && scfg->sample_hz) {
			if (cli_errors_printed() == errors_before_gi) /* else gi_open said why */
				cli_error("cannot read the guest kernel %s: %s", g->vmlinux,
					  hvp_strerror(err));
			goto fail;
		}
		if (err) /* only booting: the guest runs, without what needs its symbols */
			pr_warn("no symbols or BTF from the guest kernel %s: %s", g->vmlinux,
				hvp_strerror(err));
		if (err)
			out->gi = NULL;
		if (out->gi && !gi_has_btf(out->gi) && scfg->sample_hz)
			pr_warn("%s has no BTF (a kernel built without CONFIG_DEBUG_INFO_BTF): samples "
				"get kernel symbols but no thread identity; give its structure "
				"layouts with --btf FILE (e.g. pahole --btf_encode_detached=FILE "
				"vmlinux)", g->vmlinux);
	}
	/* an error line of a step that did not stop the start (gi_open when only booting)
	 * does not say why what follows failed */
	errors_before = cli_errors_printed();
	err = sampler_create(scfg, out->gi, out->vm, &out->sampler);
	if (err)
		goto fail;
	return 0;
fail:
	if (cli_errors_printed() == errors_before) /* else the line above says why */
		cli_error("cannot start the guest: %s", hvp_strerror(err));
	guest_stop(out);
	return err;
}

void guest_stop(struct guest *gs)
{
	/* the VMM first: its destruction still calls the sampler's vCPU hooks */
	vmm_destroy(gs->vm);
	sampler_destroy(gs->sampler);
	gi_close(gs->gi);
	free(gs->cmdline);
	free(gs->host_added);
	memset(gs, 0, sizeof(*gs));
}

const char *guest_strategy(const struct guest *gs, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", vmm_strategy(gs->vm), sampler_strategy(gs->sampler));
	return buf;
}
