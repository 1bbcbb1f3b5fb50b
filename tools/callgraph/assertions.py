#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
"""Every rule a comment states is checked beside it.

Usage: tools/callgraph/assertions.py

For each function of kevd.ko (evd/, dto/, upcall_policy/, cm/ and the
internal header), the comment just above it and the body:
  - "caller holds X" (a lock) needs lockdep_assert_held() in the body;
  - "the caller owns" (the EVD, the poller rule of kevd_internal.h) or a
    "Context: the owning poller" line needs kevd_assert_owner() in it.
Prints each miss and exits 1 if there is one.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIRS = ['evd', 'dto', 'upcall_policy', 'cm']
RULES = [
    (re.compile(r'caller holds [a-z>_.-]*lock', re.I), 'lockdep_assert_held('),
    (re.compile(r'the caller owns (it|the EVD|@evd)|Context: the owning poller',
                re.I), 'kevd_assert_owner('),
]


def main():
    paths = []
    for d in DIRS:
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            if f.endswith(('.c', '.h')):
                paths.append(os.path.join(ROOT, d, f))
    out = subprocess.run(['ctags', '--c-kinds=f', '--fields=+ne',
                          '--output-format=u-ctags', '-f', '-'] + paths,
                         capture_output=True, text=True, check=True).stdout
    misses = 0
    lines = {}
    for tag in out.splitlines():
        parts = tag.split('\t')
        fields = dict(p.split(':', 1) for p in parts[3:] if ':' in p)
        if 'line' not in fields or 'end' not in fields:
            continue
        path = parts[1]
        if path not in lines:
            with open(path) as f:
                lines[path] = f.read().splitlines()
        text = lines[path]
        start, end = int(fields['line']) - 1, int(fields['end'])
        # the comment block that ends right above the definition
        i = start - 1
        comment = []
        if i >= 0 and text[i].rstrip().endswith('*/'):
            while i >= 0:
                comment.insert(0, text[i])
                if text[i].lstrip().startswith('/*'):
                    break
                i -= 1
        comment = '\n'.join(comment)
        body = '\n'.join(text[start:end])
        for rule, needed in RULES:
            if rule.search(comment) and needed not in body:
                rel = os.path.relpath(path, ROOT)
                print(f'{rel}:{start + 1}: {parts[0]}(): the comment says '
                      f'"{rule.search(comment).group(0)}", the body has no '
                      f'{needed})')
                misses += 1
    if not misses:
        print('every "caller holds" and "caller owns" has its assertion')
    return 1 if misses else 0


if __name__ == '__main__':
    sys.exit(main())
