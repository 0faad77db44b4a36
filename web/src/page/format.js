// Figures as the page shows them: sizes, rates, durations.

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = -1;
  do {
    value /= 1024;
    unit += 1;
  } while (value >= 1024 && unit < units.length - 1);
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function duration(seconds) {
  if (!Number.isFinite(seconds)) return "unknown";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** Rate over the last few seconds (so a stall shows), and the time left at that rate. */
export class Meter {
  constructor(now = () => performance.now()) {
    this.now = now;
    this.samples = [];
  }
  update(done, total) {
    const t = this.now();
    this.samples.push([t, done]);
    while (this.samples.length > 2 && t - this.samples[0][0] > 3000) this.samples.shift();
    const [t0, d0] = this.samples[0];
    const rate = t > t0 ? ((done - d0) * 1000) / (t - t0) : 0;
    const left = rate > 0 && total ? (total - done) / rate : Infinity;
    return { rate, left };
  }
}

export function progressLine(done, total, rate, left) {
  const parts = [total ? `${bytes(done)} of ${bytes(total)}` : bytes(done)];
  parts.push(`${(rate / 1048576).toFixed(1)} MiB/s`); // the same unit as the sizes
  if (total) parts.push(`${duration(left)} left`);
  return parts.join(" · ");
}
