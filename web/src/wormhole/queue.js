// A small awaitable queue: WebSockets deliver by events, while the protocol code reads in
// order ("wait for `claimed`", "the next record"), so events are queued until taken.

export class Queue {
  constructor() {
    this.items = [];
    this.waiters = [];
    this.error = null;
  }

  push(item) {
    this.items.push(item);
    this._wake();
  }

  // Every pending and future take() fails with err once nothing it wants is queued.
  fail(err) {
    if (this.error === null) this.error = err;
    this._wake();
  }

  // The first queued item for which want(item) is true, removed; waits until there is one.
  take(want = () => true) {
    return new Promise((resolve, reject) => {
      this.waiters.push({ want, resolve, reject });
      this._wake();
    });
  }

  _wake() {
    const still = [];
    for (const waiter of this.waiters) {
      const at = this.items.findIndex(waiter.want);
      if (at >= 0) waiter.resolve(this.items.splice(at, 1)[0]);
      else if (this.error !== null) waiter.reject(this.error);
      else still.push(waiter);
    }
    this.waiters = still;
  }
}
