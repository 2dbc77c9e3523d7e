/**
 * The example bodies of the API reference's "try it" forms
 * (src/docs/examples.ts): one for every RPC of both services and no other,
 * each a valid request for its RPC (parsed with the request's generated
 * schema, unknown fields refused as the server refuses them), before and
 * after the page has seen a lease; and the ids the page learns from
 * responses (src/docs/known-ids.ts) land in the bodies that need them.
 */
import { fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { Health } from "../../gen/ts/grpc/health/v1/health_pb.js";
import { LeaseQueueService } from "../../gen/ts/leasequeue/v1/leasequeue_pb.js";
import { EXAMPLES, exampleBody, PLACEHOLDERS } from "../../src/docs/examples.js";
import { knownIds, learnIds, type KnownIds } from "../../src/docs/known-ids.js";

const methods = [LeaseQueueService, Health].flatMap((service) =>
  service.methods.map((method) => ({ fullName: `${service.typeName}.${method.name}`, method })),
);

describe("the API reference's example bodies", () => {
  it("has one for every RPC of both services, and none for an RPC that does not exist", () => {
    expect(Object.keys(EXAMPLES).sort()).toEqual(methods.map((m) => m.fullName).sort());
  });

  const seen: KnownIds = {
    jobId: "01a2313e-8659-7703-9b37-3d42f376c9a8",
    lease: { jobId: "01a2313e-8659-7703-9b37-3d42f376c9a9", leaseToken: "tok" },
  };
  it.each(methods)("$fullName: its example is a valid request, with and without known ids", ({ fullName, method }) => {
    for (const ids of [{}, seen]) {
      const json = JSON.parse(exampleBody(fullName, ids));
      expect(() => fromJson(method.input, json, { ignoreUnknownFields: false })).not.toThrow();
    }
  });

  it("fills the lease of the last Claim into Complete, and the last job into GetJob", () => {
    const complete = "leasequeue.v1.LeaseQueueService.Complete";
    const getJob = "leasequeue.v1.LeaseQueueService.GetJob";
    expect(JSON.parse(exampleBody(complete, {}))).toMatchObject({ jobId: PLACEHOLDERS.leaseJobId, leaseToken: PLACEHOLDERS.leaseToken });

    learnIds({ job: { id: "job-submitted" } });
    expect(knownIds()).toEqual({ jobId: "job-submitted", lease: undefined });
    expect(JSON.parse(exampleBody(getJob, knownIds()))).toEqual({ jobId: "job-submitted" });
    expect(JSON.parse(exampleBody(complete, knownIds()))).toMatchObject({ jobId: PLACEHOLDERS.leaseJobId });

    learnIds({ leases: [{ job: { id: "job-claimed" }, leaseToken: "token-1" }] });
    expect(JSON.parse(exampleBody(complete, knownIds()))).toMatchObject({ jobId: "job-claimed", leaseToken: "token-1" });
    expect(JSON.parse(exampleBody(getJob, knownIds()))).toEqual({ jobId: "job-claimed" });

    // A StreamClaims message, then a response that names no job: the lease stays.
    learnIds({ lease: { job: { id: "job-streamed" }, leaseToken: "token-2" } });
    learnIds({ leases: [] });
    learnIds({});
    expect(knownIds()).toEqual({ jobId: "job-streamed", lease: { jobId: "job-streamed", leaseToken: "token-2" } });
  });
});
