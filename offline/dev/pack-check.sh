#!/usr/bin/env bash
# `npm run pack:check` (CI runs it): the package as a user gets it. `npm pack` (prepack builds the CLI), then
# `npm install -g` of the tarball into an empty prefix, then, from a folder outside any clone, `reward-harness --help`,
# a mock search and a lineage command (better-sqlite3's addon and the migrations) on the Node this machine has; then
# the exports (reward-harness/client, reward-harness/schemas) from a project that installs the tarball.
# better-sqlite3 compiles from source where no prebuilt binary can be downloaded (minutes), unless
# offline/dev/keep-native-build.ts kept the clone's compiled addon in npm's prebuild cache (CI does).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/reward-harness-pack.XXXXXX")
trap 'rm -rf "$work"' EXIT

npm pack --silent --pack-destination "$work" >"$work/pack.txt"
tarball="$work/$(tail -n 1 "$work/pack.txt")"
listing=$(tar -tzf "$tarball")
for needed in package/reward-harness package/dist/cli/main.js package/migrations/meta/_journal.json; do
  grep -qx "$needed" <<<"$listing" || { echo "pack-check: $needed is not in the tarball" >&2; exit 1; }
done
if grep -q '^package/offline/' <<<"$listing"; then
  echo 'pack-check: the tarball holds sources from offline/' >&2
  exit 1
fi

if ! npm install -g --prefix "$work/prefix" --allow-scripts=better-sqlite3 --prefer-offline --no-audit --no-fund \
  "$tarball" >"$work/install.txt" 2>&1; then
  cat "$work/install.txt" >&2
  echo 'pack-check: npm install -g of the tarball failed (above)' >&2
  exit 1
fi
grep -E '^(added|npm warn)' "$work/install.txt" || true
# Approving better-sqlite3 must be all a user does: no other install script for npm's policy to ask about.
if grep -q 'install-scripts' "$work/install.txt"; then
  echo 'pack-check: npm asks to approve install scripts beyond better-sqlite3 (above)' >&2
  exit 1
fi
installed="$work/prefix/lib/node_modules/reward-harness"
for dev in tsx esbuild typescript; do
  if [ -e "$installed/node_modules/$dev" ] || [ -e "$work/prefix/lib/node_modules/$dev" ]; then
    echo "pack-check: the install holds $dev, a dev dependency" >&2
    exit 1
  fi
done

mkdir "$work/elsewhere"
cd "$work/elsewhere"
export PATH="$work/prefix/bin:$PATH"
echo "pack-check: node $(node --version), $(command -v reward-harness)"
reward-harness --help | head -n 1
# The CPU of a --help as the user runs it (information: the target is under 0.3 s; the first start fills the cache).
TIMEFORMAT='pack-check: reward-harness --help: %3U s user + %3S s sys, %3R s wall'
for _ in 1 2 3; do time reward-harness --help >/dev/null; done
reward-harness search --dataset "$root/examples/demo.json" --backend mock --output out/best.json | tail -n 1
status=0
reward-harness lineage show none --db lineage.sqlite 2>lineage.err || status=$?
if [ "$status" -ne 2 ] || ! grep -q 'no training run "none" is recorded' lineage.err; then
  echo "pack-check: lineage show exited $status: $(cat lineage.err)" >&2
  exit 1
fi
# The package's exports, as a project that depends on it imports them: `reward-harness/client` and
# `reward-harness/schemas`, built JavaScript with declarations, on this machine's Node and on Node 22 and 24 (from the
# npm registry's `node` package), and type-checked by TypeScript resolving the exports' `types`.
mkdir "$work/consumer"
cd "$work/consumer"
printf '{"name":"consumer","private":true,"type":"module","allowScripts":{"better-sqlite3":true}}\n' >package.json
if ! npm install --prefer-offline --no-audit --no-fund "$tarball" >install.txt 2>&1; then
  cat install.txt >&2
  echo 'pack-check: npm install of the tarball into a project failed (above)' >&2
  exit 1
fi
cat >consumer.mjs <<'JS'
import { RewardClient } from 'reward-harness/client'
import { Rollout, ScoreRequest } from 'reward-harness/schemas'
const messages = [{ role: 'user', content: 'Q?' }, { role: 'assistant', content: 'A.' }]
const rollout = Rollout.parse({ id: 'r1', messages })
const client = new RewardClient({ baseUrl: 'http://127.0.0.1:9' })
if (typeof client.scoreAsync !== 'function' || rollout.input !== 'user: Q?' || !ScoreRequest.safeParse({}).error)
  throw new Error('the exports do not behave')
console.log(`pack-check: node ${process.version} imports reward-harness/client and reward-harness/schemas`)
JS
cat >consumer.ts <<'TS'
import { RewardClient } from 'reward-harness/client'
import { Rollout, type RolloutInput } from 'reward-harness/schemas'
const input: RolloutInput = { id: 'r1', messages: [{ role: 'assistant', content: 'A.' }] }
const client: RewardClient = new RewardClient({ baseUrl: 'http://127.0.0.1:9' })
export const checked: [string, RewardClient] = [Rollout.parse(input).output, client]
TS
node consumer.mjs
"$root/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext --skipLibCheck false \
  --types node --typeRoots "$root/node_modules/@types" consumer.ts
echo 'pack-check: tsc type-checks a consumer of the exports (moduleResolution nodenext)'
for major in 22 24; do
  log="$work/node$major.txt"
  if npm install --prefix "$work/node$major" --prefer-offline --no-audit --no-fund "node@$major" >"$log" 2>&1 &&
    [ -x "$work/node$major/node_modules/.bin/node" ]; then
    "$work/node$major/node_modules/.bin/node" consumer.mjs
  else
    echo "pack-check: node $major is not to be had from the registry here (skipped): $(tail -n 1 "$log")"
  fi
done

echo "pack-check: $(basename "$tarball") installs and runs outside the clone"
