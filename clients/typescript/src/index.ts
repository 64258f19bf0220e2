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
 * `"connect-json"` use the Connect protocol instead. Bundlers that honour
 * the `browser` export condition get `sepp/browser`, which uses fetch.
 *
 * @packageDocumentation
 */
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
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
export const nodeTransportFactory: TransportFactory = (baseUrl: string, options: ConnectOptions, interceptors: Interceptor[]): Transport => {
  const tls = options.tls;
  const common = {
    baseUrl,
    interceptors,
    httpVersion: "2" as const,
    readMaxBytes: MAX_MESSAGE_BYTES,
    writeMaxBytes: MAX_MESSAGE_BYTES,
    // Notice a dead server between calls rather than on the next one.
    pingIntervalMs: 10_000,
    pingTimeoutMs: 5_000,
    nodeOptions: tls
      ? { ca: tls.ca, cert: tls.cert, key: tls.key, rejectUnauthorized: tls.rejectUnauthorized, servername: tls.servername }
      : undefined,
  };
  switch (options.protocol ?? "grpc") {
    case "connect":
      return createConnectTransport({ ...common, useBinaryFormat: true });
    case "connect-json":
      return createConnectTransport({ ...common, useBinaryFormat: false });
    case "grpc-web":
      return createGrpcWebTransport({ ...common, useBinaryFormat: true });
    default:
      return createGrpcTransport({ ...common, useBinaryFormat: true });
  }
};

setDefaultTransportFactory(nodeTransportFactory);

export * from "./common.js";
