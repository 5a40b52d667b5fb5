# tools/trainer/trainer.mk - the reference GradCache trainer (docs/trainer.md).
#
# libtrmath.la: the pure numeric kernels (no MPI, no NCCL), linked by both
# trainer binaries and by the Check test of the gradients.
# ccshim-trainer: the MPI binary.  ccshim-trainer-nccl: the same sources
# over NCCL, no MPI linked (the GPU machine has none).
# The trainer's own CPPFLAGS leave out src/ (whose config.h is the shim's).
TRAINER_CPPFLAGS = -I$(top_srcdir)/include -I$(top_srcdir)/tools/trainer $(CBLAS_CFLAGS)
TRAINER_COMMON_SOURCES = tools/trainer/tr_main.c tools/trainer/tr_opts.c tools/trainer/tr_opts.h \
	tools/trainer/tr_comm.h tools/trainer/tr_comm.c tools/trainer/tr_train.h tools/trainer/tr_train_d.c tools/trainer/tr_train_f.c
EXTRA_DIST += tools/trainer/tr_math.inc tools/trainer/tr_train.inc tools/trainer/tr_ref.inc \
	tools/trainer/tr_comm_mpi.c tools/trainer/tr_comm_nccl.c tools/trainer/tr_math.h tools/trainer/tr_real.h
bench_list += bench/trainer-bench.sh
EXTRA_DIST += bench/trainer-bench.sh

if HAVE_CBLAS
noinst_LTLIBRARIES += libtrmath.la
libtrmath_la_SOURCES = tools/trainer/tr_math.h tools/trainer/tr_real.h tools/trainer/tr_math_d.c \
	tools/trainer/tr_math_f.c tools/trainer/tr_rand.c
libtrmath_la_CPPFLAGS = $(TRAINER_CPPFLAGS)
libtrmath_la_LIBADD = $(CBLAS_LIBS) -lm

if HAVE_MPI
bin_PROGRAMS += ccshim-trainer
ccshim_trainer_SOURCES = $(TRAINER_COMMON_SOURCES) tools/trainer/tr_comm_mpi.c
ccshim_trainer_CPPFLAGS = $(TRAINER_CPPFLAGS) $(MPI_CFLAGS)
ccshim_trainer_LDADD = libtrmath.la $(MPI_LIBS) $(CBLAS_LIBS) -lm
endif

if HAVE_NCCL
if HAVE_LIBNCCL
bin_PROGRAMS += ccshim-trainer-nccl
ccshim_trainer_nccl_SOURCES = $(TRAINER_COMMON_SOURCES) tools/trainer/tr_comm_nccl.c
ccshim_trainer_nccl_CPPFLAGS = $(TRAINER_CPPFLAGS) -DTR_NCCL_BINARY $(NCCL_CFLAGS)
ccshim_trainer_nccl_LDADD = libtrmath.la $(NCCL_LIBS) $(CUDA_LIBS) $(CBLAS_LIBS) -ldl -lm
endif
endif
endif
