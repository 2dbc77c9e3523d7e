import type { WriteOperation } from "./scope.js";

/** The readiness probe (Store.checkWritable): one small real write, durable like any commit. */
export function probeWrite(): WriteOperation<void> {
  return ({ now, port }) => port.touchWriteProbe(now);
}
