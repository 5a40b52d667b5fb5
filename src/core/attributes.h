/*
 * attributes.h - the core's attribute macros, included by every header of the
 * core.  Every internal non-static symbol is ccs_ and hidden (CCS_HIDDEN);
 * only the intercepted API and ccshim_ are exported (CCS_EXPORT).
 */
#ifndef CCS_ATTRIBUTES_H
#define CCS_ATTRIBUTES_H

#define CCS_HIDDEN __attribute__((visibility("hidden")))
#define CCS_EXPORT __attribute__((visibility("default")))
/* A hot-path helper inlined even where the compiler would not (so that a
 * wrapper's constant arguments fold through it). */
#define CCS_INLINE static inline __attribute__((always_inline))
#define CCS_LIKELY(x) __builtin_expect(!!(x), 1)
#define CCS_UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif
