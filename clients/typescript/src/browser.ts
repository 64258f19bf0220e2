/**
 * Sepp's TypeScript client for browsers (and any runtime with fetch): the
 * same API as `sepp`, over `@connectrpc/connect-web`. The default protocol
 * is Connect with JSON (`protocol: "connect-json"`), which any browser can
 * send; `"connect"` (binary) and `"grpc-web"` work too.
 *
 * ```ts
 * import { SeppClient } from "sepp/browser";
 *
 * const client = await SeppClient.connect(location.origin);
 * const ack = await client.enqueue({ queue: "emails", jobType: "receipt", idempotencyKey: "receipt-order-8a3f" });
 * ```
 *
 * A page on another origin than the server needs CORS in front of the
 * server (Sepp does not answer preflights itself).
 *
 * @packageDocumentation
 */
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { setDefaultTransportFactory, type ConnectOptions, type TransportFactory } from "./client.js";
import type { Interceptor, Transport } from "@connectrpc/connect";

/**
 * The browser transport factory: fetch with the protocol of
 * `options.protocol` (default Connect JSON).
 *
 * @param baseUrl - the server's origin.
 * @param options - the connect options (protocol).
 * @param interceptors - run on every call.
 */
export const webTransportFactory: TransportFactory = (baseUrl: string, options: ConnectOptions, interceptors: Interceptor[]): Transport => {
  switch (options.protocol ?? "connect-json") {
    case "grpc-web":
      return createGrpcWebTransport({ baseUrl, interceptors, useBinaryFormat: true });
    case "connect":
      return createConnectTransport({ baseUrl, interceptors, useBinaryFormat: true });
    default:
      // Ignore fields a newer server adds to its answers.
      return createConnectTransport({ baseUrl, interceptors, useBinaryFormat: false, jsonOptions: { ignoreUnknownFields: true } });
  }
};

setDefaultTransportFactory(webTransportFactory);

export * from "./common.js";
