/* SPDX-License-Identifier: MIT */
/* Private to cli/: the command table and the guest options shared by run and record. */
#ifndef HVPROF_CLI_H
#define HVPROF_CLI_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#include <hvprof/sampler.h>
#include <hvprof/vmm.h>

/* Exit statuses of hvprof (documented in docs/hvprof.1.md). */
#define EXIT_OK 0
#define EXIT_GUEST_FAILED 1 /* the guest's own exit status was non-zero / it crashed */
#define EXIT_USAGE 2        /* bad command line */
#define EXIT_ERROR 3        /* hvprof could not do its job (files, KVM, recording) */
#define EXIT_REGRESSION 1   /* hvprof diff --fail-on-regression found one */
#define EXIT_INTERRUPTED 130

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
	bool runs_guest; /* its process runs a guest's vCPUs: hvprof's code on a huge page first */
};

int cmd_run(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_kernel_info(int argc, char **argv);

struct domain_map;

/* Guest options (--image, --kernel, ...), parsed into what vmm_create needs. */
struct guest_opts {
	const char *image_dir;  /* resolved image directory, or NULL */
	const char *kernel;     /* --kernel, else the image's */
	const char *initrd;     /* --initrd, else the image's */
	const char *append;
	const char *run_cmd;
	unsigned int repeat;    /* record --repeat N: hvprof_repeat=N on the command line (0: none) */
	uint64_t mem_mib;
	unsigned int cpus;
	double duration_s;
	struct vmm_initramfs_file *adds;
	size_t n_adds;
	enum vmm_kaslr kaslr;   /* --kaslr */
	uint64_t kaslr_slide;
	const char *vmlinux_opt; /* --vmlinux */
	const char *btf_opt;     /* --btf */
	int no_seccomp;          /* --no-seccomp */
	/* from the image manifest */
	char *m_bzimage, *m_bzimage_lz4; /* the image's kernel as bzImages (symbols: m_kernel) */
	char *m_kernel, *m_initrd, *m_btf, *m_rootfs, *m_cmdline, *m_kernel_version;
	/* a disk-rooted image: its disk (attached as vda, snapshot), and the initramfs that lays
	 * --add files (put under add_dir) over it (cli/image.c, docs/guest-interface.md) */
	char *m_disk, *m_add_initrd, *m_add_dir;
	char *image_path; /* the directory of a bundled image given by name, owned */
	/* built */
	char *cmdline;
	void *initrd_buf;
	size_t initrd_len;
	const char *vmlinux; /* ELF with symbols, for guestinfo (NULL if unknown) */
	const char *btf;
	/* --domain/--connect/--domain-xml/--strict (cli/domain_opts.c, docs/howto-libvirt.md) */
	const char *domain, *connect, *domain_xml;
	int strict;
	int mem_set, cpus_set;    /* --mem/--cpus given: they win over the domain */
	struct domain_map *dom;   /* the mapped domain, owned */
	const char *base_cmdline; /* the domain's kernel command line, replacing the image's */
	/* --disk/--root (cli/disk_opts.c), or the domain's disks when no --disk was given */
	struct vmm_disk *disks;   /* paths owned */
	size_t n_disks;
	int disks_set;            /* --disk given: the domain's disks are left out */
	const char *root;         /* --root DEV: root=DEV on the command line */
	/* run --control without --run: the guest serves commands (hvprof_serve=1) on COM2, whose
	 * output goes to cmd_out_fd (-1: no command channel) */
	bool serve;
	int cmd_out_fd;
};

/* getopt_long option codes >= 256 for guest options; guest_opt_parse handles them. */
#define GUEST_LONG_OPTIONS                                              \
	{ "image", required_argument, NULL, 1001 },                     \
	{ "kernel", required_argument, NULL, 1002 },                    \
	{ "initrd", required_argument, NULL, 1003 },                    \
	{ "append", required_argument, NULL, 1004 },                    \
	{ "mem", required_argument, NULL, 1005 },                       \
	{ "cpus", required_argument, NULL, 1006 },                      \
	{ "duration", required_argument, NULL, 1007 },                  \
	{ "add", required_argument, NULL, 1008 },                       \
	{ "run", required_argument, NULL, 1009 },                       \
	{ "domain", required_argument, NULL, 1010 },                    \
	{ "connect", required_argument, NULL, 1011 },                   \
	{ "domain-xml", required_argument, NULL, 1012 },                \
	{ "strict", no_argument, NULL, 1013 },                          \
	{ "kaslr", required_argument, NULL, 1014 },                     \
	{ "vmlinux", required_argument, NULL, 1015 },                   \
	{ "btf", required_argument, NULL, 1030 },                       \
	{ "no-seccomp", no_argument, NULL, 1031 },                      \
	{ "disk", required_argument, NULL, 1050 },                      \
	{ "root", required_argument, NULL, 1051 }

#define GUEST_OPTIONS_HELP                                                                      \
	"  --image NAME|DIR    guest image: a bundled one by name (default, debian; built on\n" \
	"                      first use where /dev/kvm opens) or a directory (default:\n"   \
	"                      $HVPROF_IMAGE, else the default image; default names\n"        \
	"                      $HVPROF_IMAGE too when it is set)\n"                          \
	"  --kernel FILE       kernel to boot (vmlinux ELF or bzImage)\n"                     \
	"  --vmlinux FILE      kernel symbols and BTF from FILE instead of the booted kernel\n" \
	"  --btf FILE          the kernel's structure layouts (BTF) from FILE, for a kernel\n"  \
	"                      built without them (pahole --btf_encode_detached=FILE vmlinux)\n" \
	"  --no-seccomp        do not confine the vCPU and device threads (debugging only)\n"   \
	"  --kaslr MODE        auto (random slide for a relocatable bzImage, as a real boot),\n" \
	"                      off, or a slide in bytes (0x..., multiple of 2 MiB)\n"          \
	"  --initrd FILE       initramfs (newc cpio)\n"                                       \
	"  --append ARGS       more kernel command line\n"                                    \
	"  --mem MIB           guest RAM (default 256)\n"                                     \
	"  --cpus N            vCPUs (default 1)\n"                                           \
	"  --duration S        stop the guest after S seconds\n"                              \
	"  --add HOST:GUEST    put a host file into the guest at GUEST (repeatable; the image\n" \
	"                      is not modified)\n"                                            \
	"  --disk FILE[,ro][,snapshot]  a raw disk image as /dev/vda, vdb, ... (repeatable);\n" \
	"                      ro: read-only; snapshot: writes go to a private overlay and\n" \
	"                      FILE is never modified\n"                                      \
	"  --root DEV          root=DEV on the kernel command line (e.g. /dev/vda)\n"          \
	"  --run 'CMD ARGS'    what the image's /init runs (default: the demo workload)\n"     \
	"  --domain NAME       boot libvirt domain NAME's kernel, initrd, cmdline, memory, vCPUs\n" \
	"                      (flags above win; docs/howto-libvirt.md)\n"                     \
	"  --connect URI       libvirt URI for --domain (default: libvirt's)\n"               \
	"  --domain-xml FILE   the same from a domain definition file (virsh dumpxml)\n"      \
	"  --strict            what the domain has and hvprof lacks is an error, not a warning\n"

void guest_opts_init(struct guest_opts *g);
/* Handle one guest option; returns 0, or -EINVAL after printing what is wrong. */
int guest_opt_parse(struct guest_opts *g, int code, const char *arg);
/* Resolve the image, read the manifest and the initrd, build the command line. Prints errors. */
int guest_opts_finish(struct guest_opts *g);
void guest_opts_free(struct guest_opts *g);
/* --image NAME|DIR for a command that only reads the image's files (kernel-info): resolve it (a
 * bundled one is built when missing) and read its manifest into @g's m_* paths. Prints errors. */
int guest_opts_read_image(struct guest_opts *g, const char *arg);
/* Usage checks of the domain options, after parsing; prints and returns -EINVAL. */
int guest_opts_check(const struct guest_opts *g);
/* Map --domain/--domain-xml into @g where no flag was given. Prints errors and the warning. */
int guest_opts_apply_domain(struct guest_opts *g);
/* Whether two paths name the same file (false if either cannot be stat'ed). */
bool cli_same_file(const char *a, const char *b);
/* --disk FILE[,ro][,snapshot] (cli/disk_opts.c); prints what is wrong and returns -EINVAL. */
int guest_disk_opt(struct guest_opts *g, const char *arg);
/* Append a disk (the path is copied); -EINVAL (printed) past VMM_MAX_DISKS, -ENOMEM. */
int guest_disk_append(struct guest_opts *g, const char *path, bool readonly, bool snapshot);
/* --root DEV; prints what is wrong and returns -EINVAL. */
int guest_root_set(struct guest_opts *g, const char *arg);
/* Check every disk as the VMM will attach it (one error line naming the file). */
int guest_disks_finish(struct guest_opts *g);
void guest_disks_free(struct guest_opts *g);
/*
 * --image NAME|DIR (cli/image.c): a bundled image's name (default, debian) gives its directory in
 * the cache, built first with images/build-image.sh NAME when missing (@for_vm: to boot it, so
 * not built when /dev/kvm cannot be opened: -errno of that); anything else is a directory
 * (*@dir = @arg). With $HVPROF_IMAGE set, "default" is that directory, never built. Prints what
 * failed.
 */
int image_resolve(struct guest_opts *g, const char *arg, bool for_vm, const char **dir);
/* The default image's directory: $HVPROF_IMAGE, else the cache's (in @buf). */
const char *image_default_dir(char *buf, size_t len);
/*
 * After the manifest: a disk-rooted image gets its disk as vda (snapshot), and with --add (and no
 * --initrd) *@initrd becomes the image's add_initrd. Prints what failed.
 */
int image_disk_setup(struct guest_opts *g, const char **initrd);
/* Append the --add files to the initrd: under add_dir for a disk-rooted image's add_initrd. */
int image_add_files(struct guest_opts *g);
/* Fill the guest part of a vmm_config (pointers into @g). */
void guest_opts_to_config(const struct guest_opts *g, struct vmm_config *cfg);

/* A running guest: the VMM, its kernel's guestinfo session (NULL without symbols), the sampler. */
struct guest {
	struct vmm *vm;
	struct gi *gi;
	struct sampler *sampler;
	char *cmdline;    /* the command line the guest booted with */
	char *host_added; /* the words of it that this host needed (PVM), "" when none */
};

/*
 * Create the VMM from @g, open the kernel's symbols and BTF, and put a sampler (@scfg; sample_hz
 * 0 for only booting) on the VMM. Prints what failed. Return: 0 and *@out (free with
 * guest_stop); -errno.
 */
int guest_start(const struct guest_opts *g, const struct sampler_config *scfg, int console_fd,
		struct guest *out);
/* Free everything guest_start made (a zeroed @gs is fine). */
void guest_stop(struct guest *gs);
/* The strategy line: the VMM's part and the sampler's. */
const char *guest_strategy(const struct guest *gs, char *buf, size_t len);

struct recfile_writer;

/* record_meta.c: what a recording says of its run (docs/recording-format.md). */
/* META of the run's set-up: kernel, image, disks, command line, counter at @freq, call graph. */
int record_write_meta(struct recfile_writer *w, const struct guest_opts *g,
		      const struct guest *gs, unsigned int freq, const char *call_graph);
/* META kernel_slide, kaslr, kaslr_check, kaslr_relocations, pti: what the sampler learnt. */
int record_write_kernel_meta(struct recfile_writer *w, const struct sampler *sm);
/* COUNTER records: the sampler's, then the VMM's. */
int record_write_counters(struct recfile_writer *w, const struct sampler_counters *cnt,
			  const struct vmm_counters *vc);
int record_meta_u64(struct recfile_writer *w, const char *key, uint64_t v);
/*
 * record_output.c: the recording file of `record`. @path is what the user named; @tmp, while
 * not empty, the file actually written ("PATH.partial-PID-N" beside it, or
 * ".hvprof.partial-PID-N" in its directory when PATH's name leaves no room: created with
 * O_EXCL, so ours), until record_output_commit puts it in place. @fd: open for writing, the
 * caller's to close. A @path that exists and is not a regular file (/dev/null, a FIFO) or is
 * empty is written in place.
 */
struct record_output {
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	int fd;
	bool in_place_empty; /* @path was an empty regular file, written in place */
};
/* Open @o for @path: a directory, an unwritable place, a name too long fail here, before any
 * guest starts. Prints what failed. Return: 0 or -errno. Nothing of @path is changed yet. */
int record_output_open(struct record_output *o, const char *path);
/* The run has started: an existing regular, non-empty @path becomes PATH.old, the written file
 * becomes @path (if that fails, the previous one is put back). Prints what failed, naming the
 * file that holds this run's recording. Return: 0 (also when there is nothing to move) or
 * -errno; on failure @tmp is left set (record_output_keep or _discard decide). */
int record_output_commit(struct record_output *o);
/* Another process may be writing the file (an attach): it stays under its temporary name, which
 * is printed; @o forgets it (nothing removes it). */
void record_output_keep(struct record_output *o);
/* The run never started: remove the temporary file (if not committed), or empty again the
 * empty file written in place (call it before closing @fd). Prints a failure. */
void record_output_discard(struct record_output *o);

/*
 * control_session.c: `run --control PATH` (docs/control-protocol.md). control_run_create makes
 * the windows' state and the sink a SAMPLER_START_ATTACH sampler is created with
 * (control_run_sink); control_run_start serves the socket at @path on a thread of its own
 * (before vmm_run; @g and @gs are borrowed until control_run_stop); control_run_stop, after
 * vmm_run, ends an open window with the run's result, tells its client, stops the thread and
 * removes the socket. Print what failed. Return: 0; -errno.
 */
struct control_run;
int control_run_create(struct control_run **out);
const struct sampler_sink *control_run_sink(struct control_run *cr);
/* The write end of the command channel's pipe (made at the first call), for vmm_config's
 * cmd_out_fd; its read end is served by control_run_start. Return: the fd; -errno (said). */
int control_run_chan_fd(struct control_run *cr);
int control_run_start(struct control_run *cr, const char *path, const struct guest_opts *g,
		      struct guest *gs);
void control_run_stop(struct control_run *cr, const struct vmm_result *res);
void control_run_destroy(struct control_run *cr);
/* record --attach PATH (record_attach.c): the client. Return: hvprof's exit status. */
struct record_attach_args {
	const char *path;
	const char *output;
	unsigned long freq;
	bool dwarf;
	uint32_t stack_size;
	double duration_s; /* 0: until Ctrl-C or the guest's end */
	const char *exec_cmd; /* --exec CMD: run it in the guest, detach when it ends (or NULL) */
};
int record_attach(const struct record_attach_args *a);

/*
 * cmd_exec.c, `hvprof exec` (docs/control-protocol.md, EXEC). exec_encode_words: the @n words
 * joined with spaces (as ssh does) as an "EXEC ...\n" line into @buf (@len bytes). Return: 0;
 * -E2BIG longer than a message. exec_command: run that line's command in the guest of the
 * control socket @path, waiting up to @wait_s s for its command server; its output goes to our
 * stdout/stderr. *@stop (set by a signal handler; @wait_mask: the mask during waits, NULL the
 * current one) kills it. Return: its status 0..255; 255 it could not run (said); 130 stopped.
 */
int exec_encode_words(char **words, int n, char *buf, size_t len) __must_check;
int exec_command(const char *path, const char *exec_line, double wait_s,
		 volatile sig_atomic_t *stop, const sigset_t *wait_mask);

/*
 * --max-stack N of report, flamegraph, export and diff (cmd_report.c): @arg a whole number
 * 1..1000000 into *@out. Return: 0, or -EINVAL (an error line was printed).
 */
int cli_max_stack(const char *arg, unsigned int *out);
/*
 * cli_text_on_huge_page - move hvprof's code onto a 2 MiB page (cli/hugetext.c says why and how),
 * for the commands that run a guest. Return: 0; -ECANCELED when HVPROF_HUGE_TEXT=0; -ENOTSUP
 * when the executable's text is not alone in a 2 MiB-aligned range (another link); -ENOENT no
 * text segment found; mmap's, mprotect's or mremap's -errno (-EACCES/-EPERM where W^X rules
 * refuse executable anonymous memory). On these errors the file's mapping stays. Call it while
 * the process has one thread.
 */
int cli_text_on_huge_page(void);
/* getopt_long codes of the sample filters of report, flamegraph, export and diff. */
enum cli_filter_code {
	CLI_FILTER_COMM = 1201,
	CLI_FILTER_PID,
	CLI_FILTER_TID,
	CLI_FILTER_TIME,
	CLI_FILTER_KERNEL,
	CLI_FILTER_USER,
};

#define FILTER_LONG_OPTIONS                                             \
	{ "comm", required_argument, NULL, CLI_FILTER_COMM },           \
	{ "pid", required_argument, NULL, CLI_FILTER_PID },             \
	{ "tid", required_argument, NULL, CLI_FILTER_TID },             \
	{ "time", required_argument, NULL, CLI_FILTER_TIME },           \
	{ "kernel-only", no_argument, NULL, CLI_FILTER_KERNEL },        \
	{ "user-only", no_argument, NULL, CLI_FILTER_USER }

#define FILTER_OPTIONS_HELP                                                                     \
	"  Filters (a sample is kept when it passes all; the header says what was dropped):\n"  \
	"  --comm NAME[,NAME...]  threads of these comms (as the folded output's first frame)\n" \
	"  --pid PID[,PID...]     these processes (tgid, as perf report --pid)\n"                \
	"  --tid TID[,TID...]     these threads\n"                                               \
	"  --time START,END       seconds since the recording started, both included; either\n" \
	"                         side may be empty (--time 1.5, or --time ,3)\n"                \
	"  --kernel-only          samples taken in the kernel, kernel frames only\n"            \
	"  --user-only            samples taken in user mode, user frames only\n"

struct profile_options;

/*
 * A filter option of report, flamegraph, export or diff (cli/filter_opts.c): @code one of enum
 * cli_filter_code, @arg its value, into @po (the value is checked by cli_filter_check()).
 * Return: 1 handled; 0 @code is not a filter's; -EINVAL (an error line was printed).
 */
int cli_filter_opt(struct profile_options *po, int code, const char *arg);
/* Check @po's filters once parsed: 0, or -EINVAL after printing what is wrong. */
int cli_filter_check(const struct profile_options *po);
struct profile;
/* After loading @path with filters: a warning line on stderr when they left no sample of the
 * recording's (an empty report or flame graph is then no finding about the guest). */
void cli_filter_warn_empty(const struct profile *p, const char *path);
/*
 * cli_suggest - the one of @names (@n of them; NULL entries skipped) closest to the misspelled
 * @word, or NULL when none is close (at most 2 edits, fewer than a third of @word's length;
 * an edit inserts, deletes or substitutes a byte or swaps two neighbours). Borrowed from @names.
 */
const char *cli_suggest(const char *word, const char *const *names, size_t n);
struct option;
/*
 * cli_getopt_long - getopt_long(3) for a command (@argv[0] its name) that says what it refused
 * in one error line of the CLI's own (getopt's opterr is set to 0): an unknown option, with the
 * closest of @longopts when one is close (cli_suggest), an abbreviation of several (named), a
 * missing value, a value given to a flag; each with "see 'hvprof CMD --help'". Same return and
 * globals as getopt_long: on '?', the caller only exits with the usage status.
 */
int cli_getopt_long(int argc, char *const argv[], const char *shortopts,
		    const struct option *longopts);
/*
 * cli_check_output_path - can the output file @path be created or written, checked before the
 * work that fills it? A file (callers turn a "-" meaning stdout into no path first): not a
 * directory; an existing file writable; else its directory exists and is writable. Prints
 * "@what: cannot create PATH: reason" when not.
 * Return: 0 or -errno. (The file may still fail later: a full disk, a race.)
 */
int cli_check_output_path(const char *what, const char *path);
/* cli_check_output_not_input - refuse an output @out that is the input file @in (the same
 * file, by device and inode: also through a link); says so, naming @what. Return: 0 or
 * -EINVAL. */
int cli_check_output_not_input(const char *what, const char *out, const char *in);
/* cli_check_input_exists - a recording to read that is not there at all gets a line that says
 * how to get one (naming @what). Return: 0 (there, or another error the reader will say) or
 * -ENOENT. */
int cli_check_input_exists(const char *what, const char *path);
/* cli_positional_input - the recording named after the options (argv[@optind], as `hvprof
 * report perf.data` or `hvprof diff A B` take files) of @what: at most one, and not beside -i
 * (@input_set). Sets *@input to it when there is one. Says what is wrong, naming @what.
 * Return: 0 or -EINVAL. */
int cli_positional_input(const char *what, int argc, char **argv, int optind,
			 int input_set, const char **input);
/* Print an error line "hvprof: error: CMD: ..." to stderr: CMD the command running, unless the
 * message starts with its name already, and none before a command is chosen (at most 2 KiB). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Error lines printed so far (cli_error and the libraries' errors): a caller prints its own
 * general line only when nothing more precise was said. */
unsigned int cli_errors_printed(void);
/* Install SIGINT/SIGTERM handlers that ask @vm to stop; restore with NULL. */
void cli_stop_on_signals(struct vmm *vm);
/* SIGINT/SIGTERM only noted (cli_signal_received), before there is a VM to stop: set-up that
 * must not be cut half way (a file under a temporary name). A later cli_stop_on_signals(vm)
 * stops that VM at once if one came meanwhile. */
void cli_catch_signals(void);
int cli_signal_received(void);
/* Map a vmm_result to hvprof's exit status, and print a one-line outcome to stderr. */
int cli_outcome(const struct vmm_result *res);

#endif /* HVPROF_CLI_H */
