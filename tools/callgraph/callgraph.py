#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
"""Cross-file call graph of kevd.ko, from Universal Ctags output.

Usage: tools/callgraph/callgraph.py [--dot] [--check] [DIR...]

Lists, for each source file, the files whose functions it calls, then the
strongly connected components (call cycles) that span more than one file.
--check exits 1 if a cycle runs through more than two files, or if a
two-file cycle is not named in Documentation/kevd/design.rst (a line
"cycle: a.c <-> b.c"); --dot prints a Graphviz graph instead.
Only calls between the product's own functions count. A call to a static
inline function or a macro of evd/kevd_internal.h counts as calls to the
functions it calls (kevd_producer_done() is a call of kevd_schedule()).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIRS = ['evd', 'dto', 'upcall_policy', 'cm']
IDENT_CALL = re.compile(r'\b([A-Za-z_][A-Za-z0-9_]*)\s*\(')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def functions(paths):
    """name -> (file, start, end) for every function defined in paths."""
    out = subprocess.run(['ctags', '--c-kinds=f', '--fields=+ne',
                          '--output-format=u-ctags', '-f', '-'] + paths,
                         capture_output=True, text=True, check=True).stdout
    defs = {}
    for line in out.splitlines():
        parts = line.split('\t')
        name, path = parts[0], parts[1]
        fields = dict(p.split(':', 1) for p in parts[3:] if ':' in p)
        if 'line' in fields and 'end' in fields:
            defs.setdefault(name, []).append(
                (os.path.relpath(path, ROOT), int(fields['line']),
                 int(fields['end'])))
    return defs


HEADER = 'evd/kevd_internal.h'
MACRO = re.compile(r'^#define\s+(\w+)\(.*?(?<!\\)$', re.M | re.S)


def inline_callees(defs):
    """Header inline functions and macros -> the .c functions they call."""
    with open(os.path.join(ROOT, HEADER)) as f:
        text = COMMENT.sub(' ', f.read())
    bodies = {}
    for m in MACRO.finditer(text):
        bodies[m.group(1)] = m.group(0)
    for m in re.finditer(r'static inline [^;{]*?\b(\w+)\([^;{]*\)\s*\{(.*?)\n\}',
                         text, re.S):
        bodies[m.group(1)] = m.group(2)
    resolved = {}

    def resolve(name, seen):
        out = set()
        for callee in IDENT_CALL.findall(bodies[name]):
            if callee in bodies and callee not in seen:
                out |= resolve(callee, seen | {callee})
            elif callee in defs:
                out.add(callee)
        return out

    for name in bodies:
        resolved[name] = resolve(name, {name})
    return resolved


def edges(defs):
    graph = {}
    texts = {}
    inlines = inline_callees(defs)
    for name, places in defs.items():
        for path, start, end in places:
            if path not in texts:
                with open(os.path.join(ROOT, path)) as f:
                    texts[path] = f.read().splitlines()
            body = '\n'.join(texts[path][start:end])
            body = STRING.sub('""', COMMENT.sub(' ', body))
            graph.setdefault(path, {})
            callees = []
            for callee in IDENT_CALL.findall(body):
                callees += [callee] + sorted(inlines.get(callee, ()))
            for callee in callees:
                for cpath, _, _ in defs.get(callee, []):
                    if cpath != path and not cpath.endswith('.h'):
                        graph[path].setdefault(cpath, set()).add(
                            f'{name}->{callee}')
    return graph


def sccs(graph):
    """Tarjan: the strongly connected components of graph."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in comps if len(c) > 1]


def named_cycles():
    path = os.path.join(ROOT, 'Documentation/kevd/design.rst')
    named = set()
    with open(path) as f:
        for m in re.finditer(r'cycle: (\S+) <-> (\S+)', f.read()):
            named.add(frozenset((m.group(1), m.group(2))))
    return named


def main(argv):
    dirs = [a for a in argv if not a.startswith('--')] or DIRS
    paths = []
    for d in dirs:
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            if f.endswith('.c'):
                paths.append(os.path.join(ROOT, d, f))
    graph = edges(functions(paths))
    if '--dot' in argv:
        print('digraph kevd {')
        for src in sorted(graph):
            for dst in sorted(graph[src]):
                print(f'  "{src}" -> "{dst}";')
        print('}')
        return 0
    for src in sorted(graph):
        for dst in sorted(graph[src]):
            calls = sorted(graph[src][dst])
            print(f'{src} -> {dst}: {", ".join(calls)}')
    bad = 0
    named = named_cycles()
    for comp in sccs(graph):
        if len(comp) > 2:
            print(f'CYCLE through {len(comp)} files: {" ".join(comp)}')
            bad = 1
        elif frozenset(comp) in named:
            print(f'cycle (named in design.rst): {comp[0]} <-> {comp[1]}')
        else:
            print(f'CYCLE not named in design.rst: {comp[0]} <-> {comp[1]}')
            bad = 1
    if not bad:
        print('no cycle through more than two files')
    return bad if '--check' in argv else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
