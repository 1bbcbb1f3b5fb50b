#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
"""Symbolise a host-side perf profile of the benchmark on UML.

UML's memory is a (deleted) file mapped by the host process, so
`perf record -a` on the host sees the code of kevd's modules as offsets of
that file, i.e. physical addresses. kevd_bench text_map=1 prints, for one
anchor function of each module, its address and the physical address of
the pages around it; with the anchors' offsets in the .ko files this
turns the samples back into functions.

  KEVD_BENCH_ARGS="text_map=1 only=kevd-single,floor" \\
      perf record -a -e cpu-clock -F 20000 -o perf.data \\
      tools/testing/kevd-test bench uml-nodebug
  perf report -i perf.data --comm linux --sort dso,sym --stdio > report.txt
  tools/testing/bench/uml-profile.py .build/uml-nodebug/bench-console.log \\
      report.txt .build/uml-nodebug/src

prints the module functions by share of all samples.
"""
import collections
import re
import subprocess
import sys

ANCHOR = re.compile(r'textmap anchor=(\S+) \[(\S+)\] vaddr=0x([0-9a-f]+)')
PAGE = re.compile(r'textmap vaddr=0x([0-9a-f]+) phys=0x([0-9a-f]+)')
SAMPLE = re.compile(r'\s*([\d.]+)%\s+#\d+ \(deleted\)\s+\[\.\] 0x([0-9a-f]+)')


def text_symbols(ko):
    """(offset, size, name) of the functions in the .text of a .ko."""
    out = subprocess.run(['objdump', '-t', '-j', '.text', ko],
                         capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[-3] == '.text' and 'F' in f[2]:
            syms.append((int(f[0], 16), int(f[-2], 16), f[-1]))
    return syms


def main(console, report, kodir):
    phys2virt, bases, syms = {}, {}, {}
    for line in open(console, errors='replace'):
        m = ANCHOR.search(line)
        if m:
            name, mod, vaddr = m.group(1), m.group(2), int(m.group(3), 16)
            syms[mod] = text_symbols(f'{kodir}/{mod}.ko')
            off = next(s for s, _, n in syms[mod] if n == name)
            bases[mod] = vaddr - off
        m = PAGE.search(line)
        if m:
            phys2virt[int(m.group(2), 16)] = int(m.group(1), 16)
    share = collections.Counter()
    for line in open(report, errors='replace'):
        m = SAMPLE.match(line)
        if not m:
            continue
        pct, addr = float(m.group(1)), int(m.group(2), 16)
        virt = phys2virt.get(addr & ~0xfff)
        where = 'not module text'
        if virt is not None:
            virt += addr & 0xfff
            for mod, base in bases.items():
                for s, size, name in syms[mod]:
                    if s <= virt - base < s + size:
                        where = f'{mod}:{name}'
        share[where] += pct
    for where, pct in share.most_common():
        print(f'{pct:6.2f}%  {where}')


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
