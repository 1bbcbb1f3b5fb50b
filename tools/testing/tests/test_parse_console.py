#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
"""Fixture tests of tools/testing/parse_console.py.

  test_parse_console.py            run every fixture; exit 1 on a mismatch
  test_parse_console.py --update   rewrite the rc:, summary: and result rows
                                   of every .expected file from what the
                                   parser prints now (then read the diff)

fixtures/NAME.log is a console, trimmed from a real run of a test kernel
(and for the failures, edited as the failure would print it).
fixtures/NAME.expected holds, after "#" lines saying what it checks:
  # args: ARGS        parse_console.py's arguments but --console and --out
  # rc: N             its exit status
  # summary: LINE     the last line of --summary over its rows
and then, one a line, every row it must write (target, suite, test,
status, tab-separated), in order.

fixtures/reports/KIND.txt is one sanitizer or kernel report. Each is put
into fixtures/uml_clean.log in the middle of a suite; the rows must be the
clean run's with only kevd_console's report check failing, the report's
first line must be named on stderr, and --sanitizers-only must fail.

parse_console.py is run as kevd-test runs it, in a subprocess.
"""
import difflib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, 'fixtures')
PARSER = os.path.join(HERE, '..', 'parse_console.py')
# where the reports go into uml_clean.log: inside kevd_api, between tests
REPORT_AFTER = '    ok 2 kevd_api_create_query'
REPORT_ROW = ('kevd_console', 'no_bug_warning_lockdep_kasan_kcsan_oops')


def run(*args):
    p = subprocess.run([sys.executable, PARSER, *args],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def parse(console, args):
    """parse_console.py on CONSOLE: (rc, rows, stderr, summary line)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'results.tsv')
        open(out, 'w').close()
        rc, _, err = run('--console', console, '--out', out, *args)
        with open(out) as f:
            rows = [l.rstrip('\n') for l in f if l.strip()]
        src, sout, _ = run('--summary', out)
        lines = sout.strip().splitlines()
        summary = (lines[-1] if lines else '') + f' (exit {src})'
    return rc, rows, err, summary


def read_expected(path):
    head, rows = [], []
    with open(path) as f:
        for l in f:
            l = l.rstrip('\n')
            if l.startswith('#'):
                head.append(l)
            elif l.strip():
                rows.append(l)
    meta = {}
    for l in head:
        key, _, val = l[1:].strip().partition(':')
        if key in ('args', 'rc', 'summary'):
            meta[key] = val.strip()
    return head, meta, rows


def check(name, want, got):
    """Compare two lists of lines; print a diff, return True if equal."""
    if want == got:
        return True
    print(f'# {name}: mismatch (- expected, + parse_console.py)')
    for l in difflib.unified_diff(want, got, lineterm='', n=1):
        if not l.startswith(('---', '+++')):
            print(f'#   {l}')
    return False


def fixture_test(name, update):
    log = os.path.join(FIXTURES, name + '.log')
    exp = os.path.join(FIXTURES, name + '.expected')
    head, meta, want = read_expected(exp)
    rc, rows, err, summary = parse(log, meta['args'].split())
    if update:
        with open(exp, 'w') as f:
            for l in head:
                key = l[1:].strip().partition(':')[0]
                if key == 'rc':
                    l = f'# rc: {rc}'
                elif key == 'summary':
                    l = f'# summary: {summary}'
                f.write(l + '\n')
            for r in rows:
                f.write(r + '\n')
        return True
    want_all = [f'rc: {meta["rc"]}', f'summary: {meta["summary"]}'] + want
    got_all = [f'rc: {rc}', f'summary: {summary}'] + rows
    ok = check(name, want_all, got_all)
    if not ok:
        for l in err.splitlines()[:10]:
            print(f'#   stderr: {l}')
    return ok


# What the summary prints for failures.log's failed tests, in order, and
# then its last line: CI shows only the end of the output.
FAILURE_DETAILS = [
    'FAILED: uml kevd_api kevd_api_resize',
    '    # kevd_api_resize: EXPECTATION FAILED at kunit_tests/api_test.c:201',
    '    Expected q.qlen == 512, but',
    '    q.qlen == 256 (0x100)',
    'FAILED: uml kevd_dto kevd_dto_race_closed',
    '    # kevd_dto_race_closed: EXPECTATION FAILED at '
    'kunit_tests/dto_test.c:377',
    '    Expected st.polled == st.added, but',
    '    st.polled == 199 (0xc7)',
    '    st.added == 200 (0xc8)',
    "    the arm window's completion was not polled",
    '    # kevd_dto_race_closed: try timed out',
    '    not ok 2 lenient_report_wait',
    '    not ok 4 lenient_report_single_mixed',
    'FAILED: uml kevd_dto@defer_arm=64 (suite)',
    'FAILED: uml kevd_e2e siw0_many',
    '    # siw0_many: kevd-e2e device=siw0 mode=many ops=400 events=567 '
    'lost=3 dup=0 bad=0 misordered=0 ev_per_s=6486 upcalls=567 arms=505 '
    'repolls=1 disabled_upcalls=0 rc=0',
    '    # siw0_many: kevd-e2e device=siw0 mode=many ops=400 events=570 '
    'lost=0 dup=0 bad=0 misordered=0 ev_per_s=6502 upcalls=570 arms=511 '
    'repolls=0 disabled_upcalls=0 rc=0',
]


def failure_details_test():
    _, meta, _ = read_expected(os.path.join(FIXTURES, 'failures.expected'))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'results.tsv')
        open(out, 'w').close()
        run('--console', os.path.join(FIXTURES, 'failures.log'), '--out',
            out, *meta['args'].split())
        _, sout, _ = run('--summary', out)
    lines = sout.splitlines()
    at = lines.index(FAILURE_DETAILS[0]) if FAILURE_DETAILS[0] in lines \
        else 0
    ok = check('failure_details', FAILURE_DETAILS,
               lines[at:at + len(FAILURE_DETAILS)])
    if not lines or not lines[-1].endswith(' skipped'):
        print('# failure_details: the count is not the last line')
        ok = False
    return ok


# What the summary prints for a console report (reports/hung_task.txt put
# into uml_clean.log): its first line, then the frames of its trace, up
# to ten: CI shows where it happened, not only that it did.
REPORT_DETAILS = [
    'FAILED: uml kevd_console no_bug_warning_lockdep_kasan_kcsan_oops',
    '    INFO: task modprobe:412 blocked for more than 122 seconds.',
    '    __schedule+0x4f1/0xe80',
    '    schedule+0x4e/0x100',
    '    schedule_timeout+0x1b5/0x230',
    '    ? __pfx_schedule_timeout+0x10/0x10',
    '    wait_for_completion_timeout+0x95/0x130',
    '    kunit_try_catch_run+0x94/0x190 [kunit]',
    '    kunit_run_case_catch_errors+0x7f/0x110 [kunit]',
    '    kunit_run_tests+0x2b3/0x6a0 [kunit]',
    '    __kunit_test_suites_init+0x6f/0xb0 [kunit]',
    '    kunit_module_notify+0x20e/0x290 [kunit]',
]


def report_details_test(clean_meta):
    with open(os.path.join(FIXTURES, 'reports', 'hung_task.txt')) as f:
        report = f.read().splitlines()
    with open(os.path.join(FIXTURES, 'uml_clean.log')) as f:
        base = f.read().splitlines()
    at = base.index(REPORT_AFTER) + 1
    with tempfile.TemporaryDirectory() as tmp:
        console = os.path.join(tmp, 'console.log')
        with open(console, 'w') as f:
            f.write('\n'.join(base[:at] + report + base[at:]) + '\n')
        out = os.path.join(tmp, 'results.tsv')
        open(out, 'w').close()
        run('--console', console, '--out', out,
            *clean_meta['args'].split())
        _, sout, _ = run('--summary', out)
    lines = sout.splitlines()
    at = lines.index(REPORT_DETAILS[0]) if REPORT_DETAILS[0] in lines else 0
    return check('report_details', REPORT_DETAILS + [lines[-1]],
                 lines[at:at + len(REPORT_DETAILS) + 1])


# A case that takes 30 s or more is named on stderr (the hung-task
# detector fails a run at 60 s); a faster one, and a suite's own result
# line, are not.
SLOW_CONSOLE = [
    '[   10.000000] KTAP version 1',
    '[   10.000100] 1..1',
    '[   10.000200]     KTAP version 1',
    '[   10.000300]     # Subtest: kevd_x',
    '[   10.000400]     1..2',
    '[   39.000000]     ok 1 fast_case',
    '[   77.400000]     ok 2 slow_case',
    '[  120.000000] ok 1 kevd_x',
]


def slow_case_test():
    with tempfile.NamedTemporaryFile('w', suffix='.log') as tmp:
        tmp.write('\n'.join(SLOW_CONSOLE) + '\n')
        tmp.flush()
        _, _, err = run('--console', tmp.name, '--target', 'smp',
                        '--sanitizers-only', '--out', os.devnull)
    slow = [l for l in err.splitlines() if 'slow case:' in l]
    return check('slow_case', ['[smp] slow case: kevd_x slow_case took 38 s '
                               '(the hung-task detector reports 60 s: '
                               'split it)'], slow)


def report_test(kind, clean_meta, clean_rows):
    with open(os.path.join(FIXTURES, 'reports', kind + '.txt')) as f:
        report = f.read().splitlines()
    with open(os.path.join(FIXTURES, 'uml_clean.log')) as f:
        base = f.read().splitlines()
    at = base.index(REPORT_AFTER) + 1
    console = base[:at] + report + base[at:]
    # the report's headline: its first line of text (no timestamp, no
    # ==== or ---[ cut here ]--- rule)
    text = [l.split('] ', 1)[1] if l.startswith('[ ') else l
            for l in report]
    headline = next(l for l in text if l.strip() and 'cut here' not in l
                    and not set(l.strip()) <= set('=-'))
    want = []
    for r in clean_rows:
        f = r.split('\t')
        if tuple(f[1:3]) == REPORT_ROW:
            f[3] = 'fail'
        want.append('\t'.join(f))
    with tempfile.NamedTemporaryFile('w', suffix='.log') as tmp:
        tmp.write('\n'.join(console) + '\n')
        tmp.flush()
        rc, rows, err, _ = parse(tmp.name, clean_meta['args'].split())
        src, _, _ = run('--console', tmp.name, '--target', 'uml',
                        '--sanitizers-only', '--out', os.devnull)
    ok = check(f'report {kind}', want, rows)
    if f'console: {headline}' not in err:
        print(f'# report {kind}: stderr does not name "{headline}"')
        ok = False
    if src != 1:
        print(f'# report {kind}: --sanitizers-only exited {src}, not 1')
        ok = False
    return ok


def main():
    update = '--update' in sys.argv[1:]
    names = sorted(f[:-len('.expected')] for f in os.listdir(FIXTURES)
                   if f.endswith('.expected'))
    kinds = sorted(f[:-len('.txt')]
                   for f in os.listdir(os.path.join(FIXTURES, 'reports'))
                   if f.endswith('.txt'))
    tests = [(n, lambda n=n: fixture_test(n, update)) for n in names]
    if not update:
        _, clean_meta, clean_rows = read_expected(
            os.path.join(FIXTURES, 'uml_clean.expected'))
        tests += [(f'report_{k}',
                   lambda k=k: report_test(k, clean_meta, clean_rows))
                  for k in kinds]
        tests.append(('failure_details', failure_details_test))
        tests.append(('report_details',
                      lambda: report_details_test(clean_meta)))
        tests.append(('slow_case', slow_case_test))
        # the clean consoles must pass --sanitizers-only (kevd-test run)
        for n in ('uml_clean', 'smp_noise'):
            tests.append((f'sanitizers_only_{n}', lambda n=n: run(
                '--console', os.path.join(FIXTURES, n + '.log'),
                '--target', 'uml', '--sanitizers-only',
                '--out', os.devnull)[0] == 0))
    print('KTAP version 1')
    print(f'1..{len(tests)}')
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        if fn():
            print(f'ok {i} {name}')
        else:
            print(f'not ok {i} {name}')
            failed += 1
    print(f'# parse_console.py fixtures: {len(tests) - failed} passed, '
          f'{failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
