#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
"""Read a test kernel's console: KTAP results, sanitizer reports, hangs.

  parse_console.py --target T --console LOG --exit-code RC --expect a,b \
                   --out results.tsv
      appends one line per test (target, suite, test, pass|fail|skip),
      and what a failure printed to results.tsv.details
  parse_console.py --summary results.tsv
      prints the table, the failures with what they printed and, last,
      "N passed, N failed, N skipped"; exits 1 if anything failed or
      nothing ran.
"""
import argparse
import collections
import re
import sys

TIMESTAMP = re.compile(r'^\[\s*\d+\.\d+\]\s?')
RESULT = re.compile(r'^(\s*)(ok|not ok) (\d+) ?(.*)$')
SUBTEST = re.compile(r'^(\s*)# Subtest: (\S+)')
PLAN = re.compile(r'^(\s*)1\.\.(\d+)\s*$')
# guest/kunit.sh runs some suites again under other module parameters; it
# names the pass, and the suites of that pass count as <suite>@<pass>.
PASS = re.compile(r'KEVD-HARNESS: pass ?(\S*)')

# Anything of these on the console fails the run, wherever it appears.
REPORTS = [
    r'BUG:', r'WARNING:', r'Oops', r'Kernel panic', r'kernel BUG at',
    r'general protection fault', r'KASAN:', r'KCSAN:', r'UBSAN:',
    r'possible circular locking', r'possible recursive locking',
    r'inconsistent lock state', r'possible irq lock inversion',
    r'turning off the locking correctness validator',
    r'suspicious RCU usage', r'DEBUG_LOCKS_WARN_ON', r'INFO: task .* blocked',
    r'Call Trace:', r'list_add corruption', r'list_del corruption',
    r'refcount_t: ', r'ODEBUG:', r'Unable to handle kernel',
]
REPORT_RE = re.compile('|'.join(REPORTS))
# A stack frame of a report's trace: "func+0x1a/0x40 [module]", maybe
# with "? " before it (an unreliable one). What CI shows of a report is
# its first line and the frames of its trace: where it happened.
FRAME = re.compile(r'^\s*(\? )?[\w.]+\+0x[0-9a-f]+/0x[0-9a-f]+')
FRAMES_PER_REPORT = 10
# how far after its first line a report's trace may begin
REPORT_SPAN = 60

# What a failing KUnit test printed: KUnit's failure lines (a failed
# check, a timeout, a fault), the lines of explanation after each
# (Expected ..., the two values, a _MSG check's message; a "#" line
# ends them), and the results of its failed parameter cases, all of
# those. CI shows the end of the output only: the summary prints them
# just before its last line.
FAILED_AT = re.compile(r'(EXPECTATION|ASSERTION) FAILED at|'
                       r'try (timed out|faulted|crashed)')
EXPLAIN_LINES = 4
DETAILS_PER_TEST = 12
# A shell suite's reason for a failure (guest/ktap.sh): "    # name: why",
# each of its lines, just before the test's "not ok"; shown when nothing
# KUnit's printed is.
SHELL_WHY = re.compile(r'^    # (\S+): ')


def read_console(path):
    try:
        with open(path, errors='replace') as f:
            return [TIMESTAMP.sub('', l.rstrip('\r\n')) for l in f]
    except FileNotFoundError:
        return []


# What explains a boot that never reached the harness: the first line that
# names an error, else the first report, else the last line.
DEATH = re.compile(r'failed|errno|panic|error|cannot|unable|BUG', re.I)


def report_details(lines, at):
    """The details of the console's reports, the first at lines[@at]:
    that line and the frames of its trace, then the first lines of the
    two reports after it."""
    first = [lines[at].strip()]
    for l in lines[at + 1:at + REPORT_SPAN]:
        if len(first) > FRAMES_PER_REPORT:
            break
        if FRAME.match(l):
            first.append(l.strip())
        elif REPORT_RE.search(l) and 'Call Trace:' not in l:
            break
    more = [l.strip() for l in lines[at + 1:]
            if REPORT_RE.search(l) and 'Call Trace:' not in l][:2]
    return first + more


# KUnit waits for a case uninterruptibly: modprobe kevd_test sleeps in D
# state, and the test kernels' hung-task detector reports it after 60 s
# (a failure). A case that comes near is named: time to split it (README,
# "Adding a KUnit suite").
SLOW_CASE = 30.0
STAMPED = re.compile(r'^\[\s*(\d+\.\d+)\]\s?(.*)$')


def slow_cases(path):
    """(seconds, suite, case) of each KUnit case that took SLOW_CASE
    seconds or more: the time from the line before its result (a result
    or a "KTAP version") to the result, on the console's timestamps."""
    slow, suite, prev = [], None, None
    try:
        with open(path, errors='replace') as f:
            raw = [l.rstrip('\r\n') for l in f]
    except FileNotFoundError:
        return slow
    for l in raw:
        m = STAMPED.match(l)
        if not m:
            continue
        t, text = float(m.group(1)), m.group(2)
        sub = SUBTEST.match(text)
        if sub and len(sub.group(1)) == 4:
            suite = sub.group(2)
        res = RESULT.match(text)
        if res and prev is not None and len(res.group(1)) > 0 and \
                t - prev >= SLOW_CASE:
            name = re.split(r'\s+#', res.group(4))[0].strip()
            slow.append((t - prev, suite, name))
        if res or 'KTAP version' in text:
            prev = t
    return slow


def death_line(lines):
    for pat in (DEATH, REPORT_RE):
        hit = next((l for l in lines if pat.search(l)), None)
        if hit:
            return hit.strip()
    text = [l for l in lines if l.strip()]
    return text[-1].strip() if text else '(empty console)'


def parse(args):
    lines = read_console(args.console)
    out = []
    t = args.target

    def rec(suite, test, status):
        out.append((t, suite, test, status))

    reports = [l for l in lines if REPORT_RE.search(l)]
    if reports:
        for l in reports[:20]:
            print(f'[{t}] console: {l}', file=sys.stderr)
    rec('kevd_console', 'no_bug_warning_lockdep_kasan_kcsan_oops',
        'fail' if reports else 'pass')

    begin = next((i for i, l in enumerate(lines)
                  if 'KEVD-HARNESS: begin' in l), None)
    ended = any('KEVD-HARNESS: end' in l for l in lines)
    if args.exit_code == 124 or args.exit_code == 137:
        print(f'[{t}] the boot timed out', file=sys.stderr)
    if begin is None:
        print(f'[{t}] kernel died before init ran: {death_line(lines)}',
              file=sys.stderr)
    rec('kevd_console', 'kernel_reached_init',
        'fail' if begin is None else 'pass')
    boot_ok = begin is not None and ended and args.exit_code not in (124, 137)
    rec('kevd_console', 'boot_reached_end_without_hang',
        'pass' if boot_ok else 'fail')
    if not boot_ok:
        tail = [l for l in lines[-15:]]
        for l in tail:
            print(f'[{t}] console tail: {l}', file=sys.stderr)
    for l in lines:
        if 'KEVD-HARNESS: error:' in l:
            print(f'[{t}] {l}', file=sys.stderr)
            rec('kevd_console', l.split('error:', 1)[1].strip(), 'fail')

    for sec, suite, name in slow_cases(args.console):
        print(f'[{t}] slow case: {suite} {name} took {sec:.0f} s (the '
              'hung-task detector reports 60 s: split it)', file=sys.stderr)

    if args.sanitizers_only:
        write(args.out, out)
        return 1 if any(r[3] == 'fail' for r in out) else 0

    seen = []
    closed = set()
    at = next((i for i, l in enumerate(lines) if REPORT_RE.search(l)), None)
    details = [] if at is None else [
        (t, 'kevd_console', 'no_bug_warning_lockdep_kasan_kcsan_oops', d)
        for d in report_details(lines, at)]
    pending, cases = [], []
    why = {}
    explain = 0
    suite = None
    suite_tests = collections.Counter()
    planned = {}
    suffix = ''
    for l in lines[begin or 0:]:
        m = PASS.search(l)
        if m:
            suffix = '@' + m.group(1) if m.group(1) else ''
            continue
        m = SUBTEST.match(l)
        if m and len(m.group(1)) == 4:
            suite = m.group(2) + suffix
            if suite not in seen:
                seen.append(suite)
            continue
        m = PLAN.match(l)
        if m and suite is not None and len(m.group(1)) == 4:
            planned[suite] = int(m.group(2))
            continue
        m = SHELL_WHY.match(l)
        if m:
            why.setdefault(m.group(1), []).append(l.strip())
        m = RESULT.match(l)
        if FAILED_AT.search(l):
            explain = EXPLAIN_LINES
            pending.append(l.strip())
        elif explain and not m and not l.strip().startswith('#'):
            explain -= 1
            pending.append(l.strip())
        else:
            explain = 0
        if not m or suite is None:
            continue
        explain = 0
        indent, verdict, rest = len(m.group(1)), m.group(2), m.group(4)
        if indent > 4 and verdict == 'not ok':
            cases.append(l.strip())
        name = re.split(r'\s+#', rest)[0].strip() or '(unnamed)'
        skip = re.search(r'#\s*SKIP', rest, re.IGNORECASE) is not None
        status = 'skip' if skip else ('pass' if verdict == 'ok' else 'fail')
        if indent == 4:
            rec(suite, name, status)
            suite_tests[suite] += 1
            if status == 'fail':
                print(f'[{t}] FAIL {suite}.{name}', file=sys.stderr)
                lines = pending[:DETAILS_PER_TEST]
                if not lines and not cases and name in why:
                    lines = why[name][:DETAILS_PER_TEST]
                if len(pending) > DETAILS_PER_TEST:
                    lines.append(f'... {len(pending) - DETAILS_PER_TEST} '
                                 'more lines on the console')
                details += [(t, suite, name, d) for d in lines + cases]
            pending, cases, why = [], [], {}
        elif indent == 0:
            if status == 'fail' and not any(
                    r[1] == suite and r[3] == 'fail' for r in out):
                rec(suite, '(suite)', 'fail')
            closed.add(suite)
            suite = None

    for s in [s for s in args.expect.split(',') if s]:
        if s not in seen or not suite_tests[s]:
            print(f'[{t}] expected suite {s} did not run', file=sys.stderr)
            rec(s, '(suite ran)', 'fail')
        elif s not in planned:
            print(f'[{t}] suite {s} printed no plan (1..N)', file=sys.stderr)
            rec(s, '(suite planned)', 'fail')
        elif planned[s] != suite_tests[s]:
            # a suite that died after some tests is not a suite that ran
            print(f'[{t}] suite {s} planned {planned[s]} tests, '
                  f'ran {suite_tests[s]}', file=sys.stderr)
            rec(s, f'(planned {planned[s]}, ran {suite_tests[s]})', 'fail')
        elif s not in closed:
            # all its tests ran, then the kernel died before the suite's
            # own result line: the suite did not finish
            print(f'[{t}] suite {s} has no result line', file=sys.stderr)
            rec(s, '(suite finished)', 'fail')
    write(args.out, out)
    write(args.out + '.details', details)
    return 0


def write(path, rows):
    with open(path, 'a') as f:
        for r in rows:
            f.write('\t'.join(r) + '\n')


def summary(path):
    rows = []
    with open(path) as f:
        for l in f:
            parts = l.rstrip('\n').split('\t')
            if len(parts) == 4:
                rows.append(parts)
    per = collections.OrderedDict()
    for t, s, _, st in rows:
        per.setdefault((t, s), collections.Counter())[st] += 1
    print(f"{'kernel':<7} {'suite':<28} {'pass':>6} {'fail':>6} {'skip':>6}")
    for (t, s), c in per.items():
        print(f"{t:<7} {s:<28} {c['pass']:>6} {c['fail']:>6} {c['skip']:>6}")
    failed = [r for r in rows if r[3] == 'fail']
    details = collections.defaultdict(list)
    try:
        with open(path + '.details', errors='replace') as f:
            for l in f:
                parts = l.rstrip('\n').split('\t', 3)
                if len(parts) == 4:
                    details[tuple(parts[:3])].append(parts[3])
    except FileNotFoundError:
        pass
    for t, s, n, _ in failed:
        print(f'FAILED: {t} {s} {n}')
        for d in details.get((t, s, n), []):
            print(f'    {d}')
    total = collections.Counter(r[3] for r in rows)
    print(f"{total['pass']} passed, {total['fail']} failed, "
          f"{total['skip']} skipped")
    return 1 if failed or not rows else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--summary')
    ap.add_argument('--target')
    ap.add_argument('--console')
    ap.add_argument('--exit-code', type=int, default=0)
    ap.add_argument('--expect', default='')
    ap.add_argument('--out')
    ap.add_argument('--sanitizers-only', action='store_true')
    args = ap.parse_args()
    if args.summary:
        return summary(args.summary)
    return parse(args)


if __name__ == '__main__':
    sys.exit(main())
