/**
 * Sepp's TypeScript client for Node (20 or later): a job queue whose retries
 * never become duplicates.
 *
 * ```ts
 * import { SeppClient } from "sepp";
 *
 * const client = await SeppClient.connect("http://localhost:50051");
 * const ack = await client.enqueue({ queue: "emails", jobType: "receipt", idempotencyKey: "receipt-order-8a3f" });
 * ```
 *
 * The default transport speaks gRPC over HTTP/2 (h2c for `http://`, TLS for
 * `https://`) through `@connectrpc/connect-node`; `protocol: "connect"` or
 * `"connect-json"` use the Connect protocol over HTTP/1.1 instead. Bundlers that honour
 * the `browser` export condition get `sepp/browser`, which uses fetch.
 *
 * @packageDocumentation
 */
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { setDefaultTransportFactory, type ConnectOptions, type TransportFactory } from "./client.js";
import type { Interceptor, Transport } from "@connectrpc/connect";

/** The largest message sent or accepted, as on the server. */
const MAX_MESSAGE_BYTES = 64 << 20;

/**
 * The Node transport factory: HTTP/2 (h2c or TLS) with the protocol of
 * `options.protocol` (default gRPC).
 *
 * @param baseUrl - `http://host:port` or `https://host:port`.
 * @param options - the connect options (protocol, tls).
 * @param interceptors - run on every call.
 */
export const nodeTransportFactory: TransportFactory = (
  baseUrl: string,
  options: ConnectOptions,
  interceptors: Interceptor[],
): Transport | { transport: Transport; close(): void } => {
  const tls = options.tls;
  const nodeOptions = tls
    ? { ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: tls.rejectUnauthorized, servername: tls.servername }
    : undefined;
  const common = {
    baseUrl,
    interceptors,
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
    jsonOptions: { ignoreUnknownFields: true },
  };
  // gRPC runs over HTTP/2 (h2c for http://), one multiplexed connection.
  // The Connect protocol and gRPC-Web go over HTTP/1.1, which every proxy and
  // browser speaks. (A Sepp server also answers them over cleartext HTTP/2:
  // it hands such a connection to its gRPC stack only when its first request
  // is a gRPC call.)
  const http1 = { ...common, httpVersion: "1.1" as const, nodeOptions };
  switch (options.protocol ?? "grpc") {
    case "connect":
      return createConnectTransport({ ...http1, useBinaryFormat: true });
    case "connect-json":
      return createConnectTransport({ ...http1, useBinaryFormat: false });
    case "grpc-web":
      return createGrpcWebTransport({ ...http1, useBinaryFormat: true });
    default: {
      // Notice a dead connection between calls rather than on the next one.
      const sessionManager = new Http2SessionManager(baseUrl, { pingIntervalMs: 10_000, pingTimeoutMs: 5_000 }, nodeOptions);
      const transport = createGrpcTransport({ ...common, useBinaryFormat: true, sessionManager });
      return { transport, close: () => sessionManager.abort() };
    }
  }
};

setDefaultTransportFactory(nodeTransportFactory);

export * from "./common.js";
