# tests/trainer/trainer-tests.mk - tests of the reference trainer
# (tools/trainer, docs/trainer.md).
TRAINER_SHELL_TESTS = tests/trainer/trainer-options.sh tests/trainer/trainer-gradients.sh \
	tests/trainer/trainer-inject.sh tests/trainer/trainer-nccl-host.sh tests/trainer/trainer-shim.sh \
	tests/trainer/trainer-rebuild.sh
dist_check_SCRIPTS += $(TRAINER_SHELL_TESTS)
TESTS += $(TRAINER_SHELL_TESTS)
EXTRA_DIST += tests/trainer/trainer-lib.sh

if HAVE_CBLAS
if HAVE_CHECK
check_PROGRAMS += tests/trainer/test-trainer-math
tests_trainer_test_trainer_math_SOURCES = tests/trainer/test_trainer_math.c
tests_trainer_test_trainer_math_CPPFLAGS = $(TRAINER_CPPFLAGS) $(CHECK_CFLAGS)
tests_trainer_test_trainer_math_LDADD = libtrmath.la $(CHECK_LIBS) -lm
TESTS += tests/trainer/test-trainer-math
endif
endif
