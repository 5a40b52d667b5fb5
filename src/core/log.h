/*
 * log.h - ccshim's one way to speak: lines prefixed "ccshim[RANK@HOST]: ",
 * to stderr or to the CCSHIM_LOG file.  Safe from any thread; never
 * allocates (formats into a stack buffer and writes it with one write(2)).
 */
#ifndef CCS_LOG_H
#define CCS_LOG_H

/* NOTE: a line the user asked for (the exit summary): shown at every level. */
enum ccs_log_level { CCS_LOG_ERROR = 0, CCS_LOG_WARN = 1, CCS_LOG_INFO = 2, CCS_LOG_DEBUG = 3, CCS_LOG_NOTE = 4 };

__attribute__((visibility("hidden"), format(printf, 2, 3))) void ccs_log(int level, const char *fmt, ...);

/* Logs at most once per FLAG (an int the caller keeps, static or per object). */
__attribute__((visibility("hidden"), format(printf, 3, 4))) void ccs_log_once(int *flag, int level,
                                                                              const char *fmt, ...);

/* Opens the CCSHIM_LOG destination (after config load and whenever the rank
 * becomes known, as the file pattern may name it). */
__attribute__((visibility("hidden"))) void ccs_log_open(void);

/* Expands a file pattern PAT into OUT (N bytes): %r rank, %p pid, %h host,
 * %j job, %% a percent sign (CCSHIM_LOG, CCSHIM_METRICS).  Returns 0, or -1
 * when it does not fit. */
__attribute__((visibility("hidden"))) int ccs_expand_pattern(const char *pat, char *out, unsigned long n);

/* Raw write of a preformatted block (diagnostic dumps), same destination. */
__attribute__((visibility("hidden"))) void ccs_log_raw(const char *text, unsigned long len);

#define CCS_LOG(level, ...) ccs_log(CCS_LOG_##level, __VA_ARGS__)

#endif
