/* test_config.c - parsing of the CCSHIM_* table. */
#include "ccs_config.h"
#include "unit_main.h"
#include <stdio.h>
#include <string.h>

static const char *names[16], *values[16];
static int nenv;
static char reports[8][512];
static int nreports;

static const char *fake_getenv(const char *name)
{
    for (int i = 0; i < nenv; i++)
        if (strcmp(names[i], name) == 0)
            return values[i];
    return NULL;
}
static void fake_report(const char *msg)
{
    if (nreports < 8)
        snprintf(reports[nreports++], sizeof reports[0], "%s", msg);
}
static void setenv_fake(const char *n, const char *v)
{
    names[nenv] = n;
    values[nenv++] = v;
}
static void reset(void)
{
    nenv = nreports = 0;
}

START_TEST(defaults)
{
    struct ccs_config c;
    reset();
    ck_assert_int_eq(ccs_config_load(&c, fake_getenv, fake_report), 0);
    ck_assert_int_eq(c.disable, 0);
    ck_assert_str_eq(c.log, "stderr");
    ck_assert_int_eq(c.log_level, 1); /* warn */
    ck_assert_str_eq(c.trace_dir, "");
    ck_assert_int_eq(c.ring_size, 65536);
    ck_assert_int_eq(c.stack_depth, 16);
    ck_assert_int_eq(c.summary, 1);
    ck_assert_int_eq(nreports, 0);
}
END_TEST

START_TEST(good_values)
{
    struct ccs_config c;
    reset();
    setenv_fake("CCSHIM_DISABLE", "yes");
    setenv_fake("CCSHIM_LOG_LEVEL", "DEBUG");
    setenv_fake("CCSHIM_TRACE_DIR", "/tmp/x");
    setenv_fake("CCSHIM_RING_SIZE", "2048");
    setenv_fake("CCSHIM_SUMMARY", "off");
    ck_assert_int_eq(ccs_config_load(&c, fake_getenv, fake_report), 0);
    ck_assert_int_eq(c.disable, 1);
    ck_assert_int_eq(c.log_level, 3);
    ck_assert_str_eq(c.trace_dir, "/tmp/x");
    ck_assert_int_eq(c.ring_size, 2048);
    ck_assert_int_eq(c.summary, 0);
}
END_TEST

START_TEST(bad_values_named_and_defaulted)
{
    struct ccs_config c;
    reset();
    setenv_fake("CCSHIM_RING_SIZE", "12x");
    setenv_fake("CCSHIM_STACK_DEPTH", "99");
    setenv_fake("CCSHIM_LOG_LEVEL", "loud");
    setenv_fake("CCSHIM_SUMMARY", "maybe");
    ck_assert_int_eq(ccs_config_load(&c, fake_getenv, fake_report), 4);
    ck_assert_int_eq(nreports, 4);
    ck_assert_int_eq(c.ring_size, 65536);
    ck_assert_int_eq(c.stack_depth, 16);
    ck_assert_int_eq(c.log_level, 1);
    ck_assert_int_eq(c.summary, 1);
    int found_level = 0, found_bool = 0, found_ring = 0, found_depth = 0;
    for (int i = 0; i < nreports; i++) {
        found_ring |= strstr(reports[i], "CCSHIM_RING_SIZE='12x'") && strstr(reports[i], "1024..16777216") &&
                      strstr(reports[i], "default '65536'");
        found_depth |= strstr(reports[i], "CCSHIM_STACK_DEPTH='99'") && strstr(reports[i], "0..32");
        found_level |= strstr(reports[i], "CCSHIM_LOG_LEVEL='loud'") && strstr(reports[i], "error warn info debug");
        found_bool |= strstr(reports[i], "CCSHIM_SUMMARY='maybe'") && strstr(reports[i], "yes/no");
    }
    ck_assert(found_level);
    ck_assert(found_bool);
    ck_assert(found_ring);
    ck_assert(found_depth);
}
END_TEST

START_TEST(enum_index)
{
    ck_assert_int_eq(ccs_config_enum_index("{error warn info debug}", "info"), 2);
    ck_assert_int_eq(ccs_config_enum_index("{error warn info debug}", "WARN"), 1);
    ck_assert_int_eq(ccs_config_enum_index("{error warn info debug}", "war"), -1);
    ck_assert_int_eq(ccs_config_enum_index("no braces", "x"), -1);
}
END_TEST

START_TEST(table_rows_complete)
{
    ck_assert_uint_gt(ccs_config_nrows, 8);
    for (size_t i = 0; i < ccs_config_nrows; i++) {
        ck_assert_int_eq(strncmp(ccs_config_rows[i].name, "CCSHIM_", 7), 0);
        ck_assert_uint_gt(strlen(ccs_config_rows[i].help), 3);
    }
}
END_TEST

/* ccshim-run's check before launch: the library's own parsers, by name. */
START_TEST(check_by_name)
{
    char why[200];
    ck_assert_int_eq(ccs_config_check("CCSHIM_ON_DESYNC", "abort", why, sizeof why), 0);
    ck_assert_int_eq(ccs_config_check("CCSHIM_ON_DESYNC", "abrot", why, sizeof why), -1);
    ck_assert_str_eq(why, "expected one of: warn abort");
    ck_assert_int_eq(ccs_config_check("CCSHIM_RING_SIZE", "100", why, sizeof why), -1);
    ck_assert_str_eq(why, "expected a decimal integer in 1024..16777216");
    ck_assert_int_eq(ccs_config_check("CCSHIM_SUMMARY", "maybe", why, sizeof why), -1);
    ck_assert_int_eq(ccs_config_check("CCSHIM_COORD", "abc", why, sizeof why), -1);
    ck_assert_str_eq(why, "expected host:port with a port in 0..65535");
    ck_assert_int_eq(ccs_config_check("CCSHIM_COORD", "10.0.0.1:0", why, sizeof why), 0);
    ck_assert_int_eq(ccs_config_check("CCSHIM_COORD", "", why, sizeof why), 0);
    ck_assert_int_eq(ccs_config_check("CCSHIM_TRACE_DIR", "/anything", why, sizeof why), 0);
    ck_assert_int_eq(ccs_config_check("CCSHIM_TRACEDIR", "x", why, sizeof why), -2);
    ck_assert_int_eq(ccs_config_other_name("CCSHIM_LIBDIR"), 1);
    ck_assert_int_eq(ccs_config_other_name("CCSHIM_TRACEDIR"), 0);
    /* No setting is also one of the other names. */
    for (size_t i = 0; i < ccs_config_nrows; i++)
        ck_assert_int_eq(ccs_config_other_name(ccs_config_rows[i].name), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("config");
    TCase *t = tcase_create("parse");
    tcase_add_test(t, defaults);
    tcase_add_test(t, good_values);
    tcase_add_test(t, bad_values_named_and_defaulted);
    tcase_add_test(t, enum_index);
    tcase_add_test(t, table_rows_complete);
    tcase_add_test(t, check_by_name);
    suite_add_tcase(s, t);
    return s;
}
CCS_UNIT_MAIN(suite)
