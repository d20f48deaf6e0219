// Builds the console into dist/ (index.html, app.js, app.css), which
// crates/server/build.rs embeds into the ponder binary. Minified, no source maps, so
// that the committed build stays small; `--watch` rebuilds on change.
import * as esbuild from 'esbuild';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');
const outdir = process.argv.includes('--outdir')
  ? path.resolve(process.argv[process.argv.indexOf('--outdir') + 1])
  : dist;

// The official driver is written for Node: its TCP connection needs `net`, `tls` and
// `crypto`, which the browser lacks (it uses the HTTP connection there instead).
const nodeStubs = {
  name: 'node-stubs',
  setup(build) {
    build.onResolve({ filter: /^(net|tls|crypto)$/ }, (args) => ({ path: args.path, namespace: 'stub' }));
    build.onLoad({ filter: /.*/, namespace: 'stub' }, () => ({ contents: 'module.exports = {};', loader: 'js' }));
  },
};

const options = {
  entryPoints: [path.join(here, 'src', 'main.ts')],
  bundle: true,
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  target: ['es2020'],
  format: 'iife',
  outfile: path.join(outdir, 'app.js'),
  inject: [path.join(here, 'src', 'shims.ts')],
  define: { 'process.browser': 'true', global: 'globalThis' },
  plugins: [nodeStubs],
  logLevel: 'warning',
};

fs.mkdirSync(outdir, { recursive: true });
fs.copyFileSync(path.join(here, 'src', 'index.html'), path.join(outdir, 'index.html'));
await esbuild.build({ ...options, entryPoints: [path.join(here, 'src', 'style.css')], outfile: path.join(outdir, 'app.css'), inject: [], plugins: [], define: {} });
if (process.argv.includes('--watch')) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
