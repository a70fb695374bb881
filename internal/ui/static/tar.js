// A tar writer for the new-job form's folder upload: the files a folder
// input chose, as a ustar stream gzipped by the browser's own
// CompressionStream. Regular files only (a browser shows no symbolic
// links or modes: every file is 0644); a name longer than ustar's 100
// bytes goes into its prefix field, or into a PAX header when no split
// fits.

const enc = new TextEncoder();
const BLOCK = 512;
const MAX_OCTAL_SIZE = 8 ** 11 - 1; // what 11 octal digits hold

/**
 * Pack entries ([{path, file}], path relative with "/" separators) as a
 * gzipped tar; onFile(done, total) after each file. Returns a Blob.
 */
export async function tarGz(entries, onFile = () => {}) {
  const gen = chunks(entries, onFile);
  const tar = new ReadableStream({
    async pull(ctrl) {
      const { value, done } = await gen.next();
      if (done) ctrl.close();
      else ctrl.enqueue(value);
    },
    cancel() { gen.return(); },
  });
  return new Response(tar.pipeThrough(new CompressionStream("gzip"))).blob();
}

async function* chunks(entries, onFile) {
  let n = 0;
  for (const { path, file } of entries) {
    yield* headers(path, file.size, Math.floor(file.lastModified / 1000));
    const reader = file.stream().getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield value;
    }
    const pad = (BLOCK - (file.size % BLOCK)) % BLOCK;
    if (pad) yield new Uint8Array(pad);
    onFile(++n, entries.length);
  }
  yield new Uint8Array(2 * BLOCK); // the end of the archive
}

/** The header blocks of a regular file: a PAX header first if needed. */
function* headers(path, size, mtime) {
  const name = enc.encode(path);
  const split = splitName(name);
  const pax = [];
  if (!split) pax.push(["path", path]);
  if (size > MAX_OCTAL_SIZE) pax.push(["size", String(size)]);
  if (pax.length) {
    const body = paxRecords(pax);
    yield header({ name: enc.encode("PaxHeaders/entry"), size: body.length, mtime, type: "x" });
    yield body;
    const pad = (BLOCK - (body.length % BLOCK)) % BLOCK;
    if (pad) yield new Uint8Array(pad);
  }
  const [prefix, rest] = split || [new Uint8Array(0), name.subarray(0, 100)];
  yield header({ name: rest, prefix, size: size > MAX_OCTAL_SIZE ? 0 : size, mtime, type: "0" });
}

/**
 * [prefix, name] for ustar: the name whole if it fits 100 bytes, else cut
 * at a "/" so the prefix fits 155 and the rest 100; null if none does.
 */
function splitName(name) {
  if (name.length <= 100) return [new Uint8Array(0), name];
  for (let i = Math.max(0, name.length - 101); i < name.length && i <= 155; i++) {
    if (name[i] === 0x2f && i > 0 && name.length - i - 1 <= 100 && name.length - i - 1 > 0) {
      return [name.subarray(0, i), name.subarray(i + 1)];
    }
  }
  return null;
}

/** PAX records: "LEN key=value\n", LEN counting the whole record. */
function paxRecords(pairs) {
  const parts = pairs.map(([k, v]) => {
    const rest = enc.encode(` ${k}=${v}\n`).length;
    let len = rest + String(rest).length;
    if (String(len).length !== String(rest).length) len = rest + String(len).length;
    return enc.encode(`${len} ${k}=${v}\n`);
  });
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { out.set(p, at); at += p.length; }
  return out;
}

/** One 512-byte ustar header. */
function header({ name, prefix = new Uint8Array(0), size, mtime, type }) {
  const h = new Uint8Array(BLOCK);
  h.set(name.subarray(0, 100), 0);
  octal(h, 100, 8, 0o644); // mode
  octal(h, 108, 8, 0); // uid
  octal(h, 116, 8, 0); // gid
  octal(h, 124, 12, size);
  octal(h, 136, 12, mtime);
  h.fill(0x20, 148, 156); // the checksum counts itself as spaces
  h[156] = type.charCodeAt(0);
  h.set(enc.encode("ustar\u000000"), 257); // magic and version
  h.set(prefix.subarray(0, 155), 345);
  let sum = 0;
  for (const b of h) sum += b;
  octal(h, 148, 7, sum); // six digits and a NUL; the space after stays
  return h;
}

/** n in octal, zero-padded, in len-1 bytes and a NUL at h[off]. */
function octal(h, off, len, n) {
  h.set(enc.encode(n.toString(8).padStart(len - 1, "0")), off);
  h[off + len - 1] = 0;
}
