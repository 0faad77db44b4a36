// What the person chose to send: one file (sent as a file), or several files or a folder
// (sent as the CLIs send a folder: a zip, see ../wormhole/folder.js). Picked in the file
// input (several at once), the folder input, or dropped (files and folders, read through
// the entries API, folders walked to the bottom).
import { bytes } from "./format.js";

// the folder's name on the receiver's side when several loose files are sent together
export const LOOSE_FILES = "wormhole-files";

class PickError extends Error {}
export { PickError };

/** From the file input (`multiple`): null, one file, or the files as one folder. */
export function fromFiles(list) {
  const files = Array.from(list ?? []);
  if (files.length === 0) return null;
  if (files.length === 1) return { kind: "file", file: files[0] };
  return { kind: "folder", name: LOOSE_FILES, files: files.map((file) => ({ path: file.name, file })) };
}

/** From the folder input (`webkitdirectory`): its files, each at its place under the folder. */
export function fromFolderInput(list) {
  const files = Array.from(list ?? []);
  if (files.length === 0) throw new PickError("That folder holds no file to send (empty folders are not sent).");
  const top = (files[0].webkitRelativePath || files[0].name).split("/")[0];
  return {
    kind: "folder",
    name: top,
    files: files.map((file) => ({ path: (file.webkitRelativePath || file.name).split("/").slice(1).join("/") || file.name, file })),
  };
}

/** From a drop: one file, one folder, or several of either as one folder. */
export async function fromDrop(transfer) {
  const entries = Array.from(transfer?.items ?? [])
    .map((item) => (typeof item.webkitGetAsEntry === "function" ? item.webkitGetAsEntry() : null))
    .filter(Boolean);
  if (entries.length === 0) return fromFiles(transfer?.files); // no entries API: files only
  if (entries.length === 1 && entries[0].isFile) return { kind: "file", file: await entryFile(entries[0]) };
  if (entries.length === 1) {
    const files = await inside(entries[0], "");
    if (files.length === 0) throw new PickError(`The folder ${entries[0].name} holds no file to send (empty folders are not sent).`);
    return { kind: "folder", name: entries[0].name, files };
  }
  const files = [];
  for (const entry of entries) files.push(...(await walk(entry, "")));
  if (files.length === 0) throw new PickError("What was dropped holds no file to send.");
  return { kind: "folder", name: LOOSE_FILES, files };
}

/** One line saying what will be sent. */
export function describe(picked) {
  if (picked === null) return "";
  if (picked.kind === "file") return `File to send: ${picked.file.name} (${bytes(picked.file.size)}); the text is not sent.`;
  const total = picked.files.reduce((n, { file }) => n + file.size, 0);
  const count = `${picked.files.length} files`;
  if (picked.name === LOOSE_FILES) {
    return `To send: ${count} (${bytes(total)}), as a folder named ${LOOSE_FILES}; the text is not sent.`;
  }
  return `Folder to send: ${picked.name} (${count}, ${bytes(total)}); the text is not sent.`;
}

// Every file under `entry`, each with its path: `prefix`, then its own place.
async function walk(entry, prefix) {
  const path = prefix ? `${prefix}/${entry.name}` : entry.name;
  if (entry.isFile) return [{ path, file: await entryFile(entry, path) }];
  return inside(entry, path);
}

// Every file inside the folder `dir`, with paths below `prefix` ("" for the folder sent).
async function inside(dir, prefix) {
  const reader = dir.createReader();
  const found = [];
  for (;;) {
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject)).catch((err) => {
      throw new PickError(`The folder ${dir.fullPath || dir.name} cannot be read (${err?.message ?? err}).`);
    });
    if (batch.length === 0) break; // readEntries gives a folder's entries in batches
    for (const child of batch) found.push(...(await walk(child, prefix)));
  }
  return found;
}

function entryFile(entry, path = entry.name) {
  return new Promise((resolve, reject) => entry.file(resolve, reject)).catch((err) => {
    throw new PickError(`"${path}" cannot be read (${err?.message ?? err}).`);
  });
}
