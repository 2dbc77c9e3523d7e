import type * as http from "node:http";
import type * as http2 from "node:http2";

/** A request on the API port, HTTP/1.1 or HTTP/2 (compatibility API). */
export type NodeRequest = http.IncomingMessage | http2.Http2ServerRequest;

/** The response to a {@link NodeRequest}. */
export type NodeResponse = http.ServerResponse | http2.Http2ServerResponse;

/**
 * A Node request handler that serves HTTP/1.1 and HTTP/2 requests alike, such
 * as the one `connectNodeAdapter()` returns.
 */
export type NodeRequestHandler = (req: NodeRequest, res: NodeResponse) => void;
