/**
 * The PRODUCER span of each submitted job (docs/operations.md "Tracing"),
 * with the messaging semantic conventions of OpenTelemetry:
 * messaging.system `leasequeue`, messaging.destination.name (the queue),
 * messaging.operation.type and messaging.operation.name `send`, and
 * messaging.message.id (the job's id, known once the job is stored).
 *
 * A schedule's run starts a trace of its own, whose ids the store wrote
 * with the run's job before any span existed (domain/trace-context.ts
 * newRootTraceContext); its span is recorded after the commit under those
 * ids, which the id generator hands out for that one span.
 */
import { SpanKind, SpanStatusCode, type Tracer } from "@opentelemetry/api";
import { RandomIdGenerator, type IdGenerator } from "@opentelemetry/sdk-trace-base";
import type { ProducerSpan, ProducerSpans } from "../domain/producer-spans.js";
import { traceparentFields, type TraceContext, type TraceparentFields } from "../domain/trace-context.js";
import { parentContext, traceContextOf } from "./span-contexts.js";

/** Random ids, except for the one span started inside withIds(). */
export class PresetIdGenerator implements IdGenerator {
  readonly #random = new RandomIdGenerator();
  #preset: TraceparentFields | undefined;

  generateTraceId(): string {
    return this.#preset?.traceId ?? this.#random.generateTraceId();
  }

  generateSpanId(): string {
    return this.#preset?.parentId ?? this.#random.generateSpanId();
  }

  /** Runs `start` (which starts one span, synchronously) with the ids of `fields`. */
  withIds<T>(fields: TraceparentFields, start: () => T): T {
    this.#preset = fields;
    try {
      return start();
    } finally {
      this.#preset = undefined;
    }
  }
}

function sendAttributes(queue: string) {
  return {
    "messaging.system": "leasequeue",
    "messaging.destination.name": queue,
    "messaging.operation.type": "send",
    "messaging.operation.name": "send",
  };
}

export function createProducerSpans(tracer: Tracer, ids: PresetIdGenerator): ProducerSpans {
  return {
    start(queue: string, parent: TraceContext | null): ProducerSpan {
      const span = tracer.startSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes: sendAttributes(queue) }, parentContext(parent));
      return {
        traceContext: traceContextOf(span.spanContext()),
        end(outcome) {
          if ("error" in outcome) {
            span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error });
          } else {
            span.setAttribute("messaging.message.id", outcome.jobId);
            if (outcome.deduplicated) span.setAttribute("leasequeue.job.deduplicated", true);
          }
          span.end();
        },
      };
    },

    recordRoot(queue, context, jobId, startTime) {
      const fields = traceparentFields(context.traceparent);
      if (fields === undefined) return;
      const span = ids.withIds(fields, () =>
        tracer.startSpan(`send ${queue}`, {
          kind: SpanKind.PRODUCER,
          root: true,
          startTime,
          attributes: { ...sendAttributes(queue), "messaging.message.id": jobId },
        }),
      );
      span.end();
    },
  };
}
