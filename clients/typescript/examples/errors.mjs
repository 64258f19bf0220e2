// Typed errors: one ConnectError subclass per reason. Bad keys fail before
// anything is sent; the server's reasons arrive as the same classes.
//
//   node examples/errors.mjs [http://127.0.0.1:50051]
import { ConnectError } from "@connectrpc/connect";
import { SeppClient, SeppError, IdempotencyKeyTooLongError, IdempotencyKeyEmptyError, JobNotFoundError } from "sepp";

const client = await SeppClient.connect(process.argv[2] ?? "http://127.0.0.1:50051");

try {
  // 129 characters of two bytes each: 258 bytes, over the 256-byte limit.
  await client.enqueue({ queue: "emails", jobType: "receipt", idempotencyKey: "é".repeat(129) });
} catch (err) {
  if (!(err instanceof IdempotencyKeyTooLongError)) throw err;
  console.log(`${err.reason}: ${err.rawMessage}`);
}

try {
  // An unset variable must not silently become "no key".
  await client.enqueue({ queue: "emails", jobType: "receipt", idempotencyKey: process.env.UNSET_ORDER_ID ?? "" });
} catch (err) {
  if (!(err instanceof IdempotencyKeyEmptyError)) throw err;
  console.log(`${err.reason}: nothing was sent`);
}

try {
  await client.getJob("01a00000-0000-7000-8000-000000000000");
} catch (err) {
  if (!(err instanceof JobNotFoundError)) throw err;
  console.log(`${err.reason} (a ConnectError: ${err instanceof ConnectError}, a SeppError: ${err instanceof SeppError}, code ${err.code})`);
}
