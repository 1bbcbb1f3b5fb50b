#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
"""Fixture tests of kevd-bench-report.py.

Every tests/<name>.raw (console lines of kevd_bench, raw lines included)
must give exactly tests/<name>.expected. The cases: a captured run on
uml-nodebug (backlogs, scale, rdma_dev), a single repetition, missing
repetitions (of runs, drains, backlogs and scale runs), and "na"
latencies and counters (a first rate above the latency limit; rdma_dev's
uncounted modes).

  python3 tools/testing/bench/test_report.py          run them (exit 1 on
                                                      a mismatch)
  python3 tools/testing/bench/test_report.py --update rewrite .expected
"""
import difflib
import importlib.util
import io
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def load_report():
    spec = importlib.util.spec_from_file_location(
        'kevd_bench_report', HERE / 'kevd-bench-report.py')
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def render(mod, raw):
    out = io.StringIO()
    rep = mod.Report(out)
    with open(raw, errors='replace') as f:
        for line in f:
            rep.line(line)
    return out.getvalue()


def main(argv):
    update = '--update' in argv
    mod = load_report()
    cases = sorted((HERE / 'tests').glob('*.raw'))
    failed = 0
    print(f'1..{len(cases)}')
    for i, raw in enumerate(cases, 1):
        exp = raw.with_suffix('.expected')
        got = render(mod, raw)
        if update:
            exp.write_text(got)
        want = exp.read_text() if exp.exists() else ''
        if got == want:
            print(f'ok {i} {raw.stem}')
            continue
        failed += 1
        print(f'not ok {i} {raw.stem}')
        sys.stdout.writelines(difflib.unified_diff(
            want.splitlines(True), got.splitlines(True),
            str(exp.relative_to(HERE)), 'kevd-bench-report.py'))
    return 1 if failed or not cases else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
