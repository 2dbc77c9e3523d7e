/**
 * A self-signed certificate for the TLS tests, made with openssl: an EC key
 * for `localhost` and 127.0.0.1, valid for a day. Without openssl the TLS
 * tests skip on a workstation and fail under CI (`opensslAvailable()`).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { join } from "node:path";

export function opensslAvailable(): boolean {
  return spawnSync("openssl", ["version"], { stdio: "ignore" }).error === undefined;
}

/** Writes `cert.pem` and `key.pem` into `dir`; returns their paths. */
export function writeSelfSignedCert(dir: string): { certPath: string; keyPath: string } {
  const certPath = join(dir, "cert.pem");
  const keyPath = join(dir, "key.pem");
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "1"],
      ...["-keyout", keyPath, "-out", certPath],
    ],
    { stdio: "pipe" },
  );
  return { certPath, keyPath };
}
