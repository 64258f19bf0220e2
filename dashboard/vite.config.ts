// The dashboard is served by `sepp serve` under /ui/ from files embedded in
// the binary (internal/server/ui, go:embed), so the build goes there.
// Hashed names are content hashes: the same sources give the same files.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/ui/",
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "../internal/server/ui/dist",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2020",
    reportCompressedSize: false,
  },
});
