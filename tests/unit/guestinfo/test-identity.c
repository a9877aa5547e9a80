#include "test.h"
static int t(void){return TEST_SKIP;}
static const struct test_case tests[]={{"todo",t}};
TEST_MAIN(tests)
