/**
 * The StreamClaims transport (HTTP/1.1, which cannot carry a bidirectional
 * stream): leases come down on StreamClaims; acknowledgements go by
 * Acknowledge calls, which the AckBatcher makes on its own.
 */
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { LeaseTransport, LeaseTransportOptions } from "./lease-transport.js";

export class StreamClaimsTransport implements LeaseTransport {
  readonly #opts: LeaseTransportOptions;

  constructor(options: LeaseTransportOptions) {
    this.#opts = options;
  }

  async once(connected: () => void): Promise<ConnectError | undefined> {
    const signal = this.#opts.closing;
    try {
      const stream = this.#opts.client.streamClaims(
        {
          queue: this.#opts.queue,
          workerId: this.#opts.workerId,
          leaseDuration: durationFromMs(this.#opts.leaseDurationMs),
          maxInFlight: this.#opts.maxInFlight,
        },
        { signal },
      );
      let first = true;
      for await (const message of stream) {
        if (first) {
          first = false;
          connected();
        }
        if (message.lease !== undefined) this.#opts.accept(message.lease);
        else if (message.cancelledJobId !== "") this.#opts.cancelled(message.cancelledJobId);
      }
      return new ConnectError("the server ended the stream", Code.Unavailable);
    } catch (e) {
      return signal.aborted ? undefined : ConnectError.from(e);
    }
  }

  /** Nothing to cut: close() cancels StreamClaims through `closing`. */
  abandon(): void {}
}
