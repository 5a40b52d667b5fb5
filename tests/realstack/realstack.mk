# tests/realstack/realstack.mk - the real-stack tier: the source report's own
# stack (torch 2.13.0 and sentence-transformers 6.0.1 from PyPI, mpi4py built
# against the system's Open MPI) in the virtual environment that
# scripts/realstack-venv.sh makes (scripts/setup.sh calls it, so its one-time
# cost is outside make check); every test is skipped, with one line saying
# why, where that environment could not be made (no PyPI).
REALSTACK_TESTS = tests/realstack/st-report.sh tests/realstack/st-trainer.sh \
	tests/realstack/st-coalesce.sh tests/realstack/st-desync.sh tests/realstack/torch-nccl.sh \
	tests/realstack/torch2-ddp-repair.sh tests/realstack/torch2-ddp-auto.sh \
	tests/realstack/gpu-scripts-cpu.sh tests/realstack/torch2-compile.sh \
	tests/realstack/torchrun-gloo.sh tests/realstack/st-shapes.sh
TESTS += $(REALSTACK_TESTS)
dist_check_SCRIPTS += $(REALSTACK_TESTS)
EXTRA_DIST += tests/realstack/lib.sh tests/realstack/torch2.sh tests/realstack/rs_common.py \
	tests/realstack/report_job.py tests/realstack/trainer_job.py tests/realstack/gloo_job.py
