#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
"""The statistics of kevd_bench, on the host.

kevd_bench (tools/testing/bench/bench_*.c) prints one raw line per run,
"kevd-bench-raw run|loaded|backlog|drain|scale|scale-set ...", and closes each
section with "kevd-bench-raw end=calib|modes|scale|rdma". This script
reads the console's kevd-bench lines (stdin or files), takes the median
of each measurement over the repetitions (the upper one for an even
count, as the module's sort did), and prints in place of each section
the lines it stands for: kevd-bench-calib, kevd-bench-floor-drain,
kevd-bench-backlog, the kevd-bench-table text table, the kevd-bench-csv
lines, the kevd-bench mode=... summaries, kevd-bench-loaded and
kevd-bench-csv-loaded (the latency at load_pct of each mode's saturated
rate), kevd-bench-scale[-floor],
kevd-bench-rdma and kevd-bench-csv-rdma. Every other line passes through.

  grep kevd-bench console.log | kevd-bench-report.py

A repetition that is missing is left out of the median; "reps" then
says how many there were. The integer arithmetic is the module's
(tools/testing/bench/RESULTS.md explains the columns).
"""
import sys

RAW = 'kevd-bench-raw '
LAT_MAX_RATE = 100000


def median(vals):
    s = sorted(vals)
    return s[len(s) // 2]


def fix(v, digits):
    """'x.yyy' for a value scaled by 10**digits."""
    d = 10 ** digits
    return f'{v // d}.{v % d:0{digits}d}'


def ratio(a, b):
    """a / b as 'x.yy'; 'na' if b is 0."""
    return 'na' if not b else fix((a * 100 + b // 2) // b, 2)


def num(v):
    return None if v == 'na' else int(v)


def fields(line):
    kind, *rest = line[len(RAW):].split()
    if kind.startswith('end='):
        return 'end', {'end': kind[4:]}
    return kind, dict(f.split('=', 1) for f in rest if '=' in f)


class Report:
    def __init__(self, out):
        self.out = out
        self.cfg = {'kernel': 'unknown', 'shared': 0, 'nohz': 0,
                    'events': 0, 'depth': 0}
        self.produce_x10 = 0    # the producer's calibrated cost
        self.floor_x10 = 0      # the floor's drain cost
        self.drains = {}        # with -> [(fill_ns, drain_ns, events)]
        self.runs = {}          # (dev, mode, rate) -> [sample dict]
        self.loaded = {}        # mode -> [sample dict], rate included
        self.backlogs = {}      # mode -> [(cpu_x10, notif_x1000)]
        self.scale_sets = {}    # (kind, n) -> scale-set fields
        self.scale = {}         # (kind, n) -> {rep: fields}

    def emit(self, line):
        self.out.write(line + '\n')
        self.out.flush()

    @property
    def kernel(self):
        return self.cfg['kernel']

    def line(self, line):
        line = line.rstrip('\r\n')
        if not line.startswith(RAW):
            self.emit(line)
            return
        kind, f = fields(line)
        handler = getattr(self, 'raw_' + kind.replace('-', '_'), None)
        if handler:
            handler(f)

    # -- raw lines -------------------------------------------------------

    def raw_config(self, f):
        for k, v in f.items():
            self.cfg[k] = v if k == 'kernel' else int(v)

    def raw_drain(self, f):
        self.drains.setdefault(f['with'], []).append(
            (int(f['fill_ns']), int(f['drain_ns']), int(f['events'])))

    def cpu_x10(self, f, produced, calibrated):
        """CPU ns per event x10: busy time less the producer's."""
        prod = int(f['prod_ns'])
        if calibrated and self.cfg['shared']:
            prod = self.produce_x10 * produced // 10
        busy = max(int(f['busy_ns']) - prod, 0)
        return busy * 10 // produced if produced else 0

    def raw_run(self, f):
        self.runs.setdefault((f.get('dev'), f['mode'], int(f['rate'])),
                             []).append(self.sample(f))

    def raw_loaded(self, f):
        s = self.sample(f)
        s['rate'] = int(f['rate'])
        self.loaded.setdefault(f['mode'], []).append(s)

    def sample(self, f):
        dev = f.get('dev')
        n = int(f['events'])
        per = (lambda v: None if v is None else
               (v * 1000 // n if n else 0))
        return {
            'ev_per_s': n * 10**9 // max(int(f['wall_ns']), 1),
            'cpu_x10': self.cpu_x10(f, n, dev is None),
            'notif': per(num(f['notif'])),
            'arms': per(num(f['arms'])),
            'upcalls': per(int(f['upcalls'])),
            'p50': num(f['p50_ns']),
            'p99': num(f['p99_ns']),
        }

    def raw_backlog(self, f):
        n = int(f['events'])
        busy = int(f['busy_ns'])
        if int(f['in_fill']):
            calib = self.produce_x10 * n // 10
            busy += max(int(f['fill_ns']) - calib, 0)
        self.backlogs.setdefault(f['mode'], []).append(
            (busy * 10 // max(n, 1), int(f['notif']) * 1000 // max(n, 1)))

    def raw_scale_set(self, f):
        self.scale_sets[(f['kind'], int(f['n']))] = f

    def raw_scale(self, f):
        self.scale.setdefault((f['kind'], int(f['n'])), {})[
            int(f['rep'])] = f

    def raw_end(self, f):
        getattr(self, 'end_' + f['end'])()

    # -- sections --------------------------------------------------------

    def end_calib(self):
        d = self.drains.get('calibration', [])
        if not d:
            return
        self.floor_x10 = median([dr * 10 // n for _, dr, n in d])
        self.produce_x10 = median([fl * 10 // n for fl, _, n in d])
        subtracted = 'calibrated' if self.cfg['shared'] else 'task-time'
        self.emit(f'kevd-bench-calib kernel={self.kernel} '
                  f'producer_cpu_ns_per_ev={fix(self.produce_x10, 1)} '
                  f'subtracted={subtracted}')
        self.emit(f'kevd-bench-floor-drain kernel={self.kernel} '
                  f'events={d[0][2]} cpu_ns_per_ev={fix(self.floor_x10, 1)} '
                  'with=calibration')

    def medians(self, samples):
        def med(k):
            vals = [s[k] for s in samples]
            return None if None in vals else median(vals)
        return {k: med(k) for k in samples[0]} | {'reps': len(samples)}

    def results(self, dev):
        """(mode -> rate -> medians, modes in order, rates in order)."""
        res, modes, rates = {}, [], []
        for (d, mode, rate), samples in self.runs.items():
            if d != dev:
                continue
            if mode not in res:
                modes.append(mode)
                res[mode] = {}
            if rate not in rates:
                rates.append(rate)
            res[mode][rate] = self.medians(samples)
        return res, modes, rates

    def cols(self, x, lat, wq, floor):
        """The printed columns of a result; 'na' where unknown."""
        def lat_us(k):
            v = lat[k] if lat else None
            return 'na' if v is None else fix(v // 100, 1)
        return {
            'c': fix(x['cpu_x10'], 1),
            'n': 'na' if x['notif'] is None else fix(x['notif'], 3),
            'a': 'na' if x['arms'] is None else fix(x['arms'], 3),
            'u': fix(x['upcalls'], 3),
            'p5': lat_us('p50'), 'p9': lat_us('p99'),
            'vw': ratio(x['ev_per_s'], wq),
            'vf': ratio(x['cpu_x10'], floor),
        }

    def end_modes(self):
        k = self.kernel
        res, modes, rates = self.results(None)
        d = self.drains.get('backlogs', [])
        if d:
            self.floor_x10 = median([dr * 10 // n for _, dr, n in d])
            self.emit(f'kevd-bench-floor-drain kernel={k} events={d[0][2]} '
                      f'cpu_ns_per_ev={fix(self.floor_x10, 1)} '
                      'with=backlogs')
        for mode, v in self.backlogs.items():
            cpu = median([c for c, _ in v])
            if mode != 'floor' and 0 in res.get(mode, {}):
                res[mode][0]['cpu_x10'] = cpu
            self.emit(f'kevd-bench-backlog kernel={k} mode={mode} '
                      f'events={self.cfg["events"]} '
                      f'backlog={self.cfg["depth"]} '
                      f'cpu_ns_per_ev={fix(cpu, 1)} '
                      f'notif_per_ev={fix(median([n for _, n in v]), 3)}')
        # The floor's saturated CPU cost is the drain's (RESULTS.md).
        if 0 in res.get('floor', {}):
            res['floor'][0]['cpu_x10'] = self.floor_x10
        self.emit('kevd-bench-table %-12s %8s %9s %9s %7s %7s %7s %8s %8s '
                  '%6s %6s' % ('mode', 'rate', 'ev/s', 'cpu_ns/ev', 'notif',
                               'arms', 'upcalls', 'p50_us', 'p99_us',
                               'vs_wq', 'vs_fl'))
        self.emit('kevd-bench-csv,kernel,mode,rate,ev_per_s,cpu_ns_per_ev,'
                  'notif_per_ev,arms_per_ev,upcalls_per_ev,p50_us,p99_us,'
                  'vs_wq,vs_floor,reps')
        for mode in modes:
            for rate in rates:
                x = res[mode].get(rate)
                if x is None:
                    continue
                # The saturated row shows the latency at the first rate.
                lat = x
                if not rate and len(rates) > 1:
                    lat = res[mode].get(rates[1])
                wq = res.get('wq', {}).get(rate, {}).get('ev_per_s', 0)
                o = self.cols(x, lat, wq, self.floor_x10)
                rn = str(rate) if rate else 'sat'
                eps, r = x['ev_per_s'], x['reps']
                if not rate:
                    self.emit(
                        f'kevd-bench mode={mode} kernel={k} ev_per_s={eps} '
                        f'cpu_ns_per_ev={o["c"]} notif_per_ev={o["n"]} '
                        f'arms_per_ev={o["a"]} p50_us={o["p5"]} '
                        f'p99_us={o["p9"]} vs_wq={o["vw"]} '
                        f'vs_floor={o["vf"]} upcalls_per_ev={o["u"]} '
                        f'reps={r}')
                self.emit('kevd-bench-table %-12s %8s %9d %9s %7s %7s %7s '
                          '%8s %8s %6s %6s' % (
                              mode, rn, eps, o['c'], o['n'], o['a'], o['u'],
                              o['p5'], o['p9'], o['vw'], o['vf']))
                self.emit(f'kevd-bench-csv,{k},{mode},{rn},{eps},{o["c"]},'
                          f'{o["n"]},{o["a"]},{o["u"]},{o["p5"]},'
                          f'{o["p9"]},{o["vw"]},{o["vf"]},{r}')
        self.end_loaded()

    def end_loaded(self):
        """The latency under load: runs paced at load_pct of each mode's
        saturated rate in the same repetition (p50_vs_wq: the mode's
        median latency over wq's, both at their own load_pct)."""
        if not self.loaded:
            return
        k, pct = self.kernel, self.cfg.get('load_pct', 0)
        wq = self.medians(self.loaded['wq']) if 'wq' in self.loaded else {}
        self.emit('kevd-bench-csv-loaded,kernel,mode,load_pct,rate,ev_per_s,'
                  'notif_per_ev,p50_us,p99_us,p50_vs_wq,reps')
        for mode, samples in self.loaded.items():
            x = self.medians(samples)
            o = self.cols(x, x, 0, 0)
            vw = 'na'
            if x['p50'] is not None and wq.get('p50') is not None:
                vw = ratio(x['p50'], wq['p50'])
            self.emit(f'kevd-bench-loaded kernel={k} mode={mode} '
                      f'load_pct={pct} rate={x["rate"]} '
                      f'ev_per_s={x["ev_per_s"]} notif_per_ev={o["n"]} '
                      f'p50_us={o["p5"]} p99_us={o["p9"]} p50_vs_wq={vw} '
                      f'reps={x["reps"]}')
            self.emit(f'kevd-bench-csv-loaded,{k},{mode},{pct},{x["rate"]},'
                      f'{x["ev_per_s"]},{o["n"]},{o["p5"]},{o["p9"]},{vw},'
                      f'{x["reps"]}')

    def scale_results(self, kind):
        sizes = sorted(n for (kd, n) in self.scale if kd == kind)
        if not sizes:
            return []
        first = self.scale[(kind, sizes[0])]
        out = []
        for n in sizes:
            reps = self.scale[(kind, n)]
            eps, notif, prod, cpu, vs = [], [], [], [], []
            for rep, f in sorted(reps.items()):
                p = int(f['events'])
                e = p * 10**9 // max(int(f['wall_ns']), 1)
                eps.append(e)
                notif.append(int(f['notif']) * 1000 // max(p, 1))
                prod.append(int(f['prod_ns']) * 10 // p if p else 0)
                cpu.append(self.cpu_x10(f, p, True))
                if rep in first:
                    f0 = first[rep]
                    p0 = int(f0['events'])
                    e0 = p0 * 10**9 // max(int(f0['wall_ns']), 1)
                    vs.append((e * 100 + e0 // 2) // max(e0, 1))
            out.append((n, median(eps), median(notif), median(prod),
                        median(cpu), median(vs) if vs else 0))
        return out

    def end_scale(self):
        k = self.kernel
        for n, eps, notif, prod, cpu, vs in self.scale_results('kevd'):
            s = self.scale_sets.get(('kevd', n), {})
            qlen = int(s.get('qlen', 0))
            mem = int(s.get('mem_bytes', 0))
            ring = int(s.get('ring_bytes', 0))
            self.emit(f'kevd-bench-scale kernel={k} evds={n} ev_per_s={eps} '
                      f'vs_first={fix(vs, 2)} notif_per_ev={fix(notif, 3)} '
                      f'qlen={qlen} mem_per_evd={mem} ring_bytes={ring} '
                      f'overhead={mem - ring} '
                      f'producer_ns_per_ev={fix(prod, 1)} '
                      f'cpu_ns_per_ev={fix(cpu, 1)}')
            self.emit(f'kevd-bench-csv,{k},scale,{n},{eps},{fix(vs, 2)},'
                      f'{fix(notif, 3)},{qlen},{mem},{ring}')
        for n, eps, _, prod, cpu, vs in self.scale_results('floor'):
            self.emit(f'kevd-bench-scale-floor kernel={k} cqs={n} '
                      f'ev_per_s={eps} vs_first={fix(vs, 2)} '
                      f'producer_ns_per_ev={fix(prod, 1)} '
                      f'cpu_ns_per_ev={fix(cpu, 1)}')
            self.emit(f'kevd-bench-csv,{k},scale-floor,{n},{eps},'
                      f'{fix(vs, 2)}')

    def end_rdma(self):
        k = self.kernel
        devs = []
        for (dev, _, _) in self.runs:
            if dev is not None and dev not in devs:
                devs.append(dev)
        self.emit('kevd-bench-csv-rdma,dev,kernel,mode,rate,ev_per_s,'
                  'cpu_ns_per_ev,notif_per_ev,arms_per_ev,upcalls_per_ev,'
                  'p50_us,p99_us,vs_wq,vs_floor,reps')
        for dev in devs:
            res, modes, rates = self.results(dev)
            for mode in modes:
                for rate in rates:
                    x = res[mode].get(rate)
                    if x is None:
                        continue
                    wq = res.get('wq', {}).get(rate, {}).get('ev_per_s', 0)
                    fl = res.get('floor', {}).get(rate, {}).get('cpu_x10', 0)
                    o = self.cols(x, x, wq, fl)
                    rn = str(rate) if rate else 'sat'
                    eps, r = x['ev_per_s'], x['reps']
                    self.emit(
                        f'kevd-bench-rdma dev={dev} kernel={k} mode={mode} '
                        f'rate={rn} ev_per_s={eps} cpu_ns_per_ev={o["c"]} '
                        f'notif_per_ev={o["n"]} arms_per_ev={o["a"]} '
                        f'upcalls_per_ev={o["u"]} p50_us={o["p5"]} '
                        f'p99_us={o["p9"]} vs_wq={o["vw"]} '
                        f'vs_floor={o["vf"]} reps={r}')
                    self.emit(
                        f'kevd-bench-csv-rdma,{dev},{k},{mode},{rn},{eps},'
                        f'{o["c"]},{o["n"]},{o["a"]},{o["u"]},{o["p5"]},'
                        f'{o["p9"]},{o["vw"]},{o["vf"]},{r}')


def main(argv):
    if any(a in ('-h', '--help') for a in argv):
        sys.exit(__doc__)
    rep = Report(sys.stdout)
    files = argv or ['-']
    for name in files:
        f = sys.stdin if name == '-' else open(name, errors='replace')
        with f:
            for line in f:
                rep.line(line)


if __name__ == '__main__':
    main(sys.argv[1:])
