/* unit_main.h - the main() of every Check suite: runs SUITE, TAP on stdout
 * (CK_TAP_LOG_FILE_NAME=- from the harness), exit status = failures. */
#ifndef CCS_UNIT_MAIN_H
#define CCS_UNIT_MAIN_H
#include <check.h>
#include <stdlib.h>

/* The suites link the library's parts statically, where the linker keeps
 * only the objects something refers to: start the runtime as the preload
 * library's constructor would (idempotent, so constructors that did are
 * fine). */
int ccs_runtime_init(void);

#define CCS_UNIT_MAIN(make_suite)                                                                          \
    int main(void)                                                                                         \
    {                                                                                                      \
        ccs_runtime_init();                                                                                \
        SRunner *sr = srunner_create(make_suite());                                                        \
        srunner_run_all(sr, CK_SILENT);                                                                    \
        int failed = srunner_ntests_failed(sr);                                                            \
        srunner_free(sr);                                                                                  \
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;                                                       \
    }
#endif
