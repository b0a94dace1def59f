"""Frame cache of the reward agent: decoded frames, JPEG data URLs, video readers and shared jobs.

Decisions where the issue was silent:
- `FrameStore` caches decoded frames per (video path, index) and data URLs per (path, index, crop,
  long side, quality) in LRU maps bounded by bytes (default 512 MiB of frames); it is shared by
  concurrent runs and guarded by a lock. Decoding and encoding run in a worker thread
  (`graph.workers.run_blocking`, priority "now") so concurrent clips overlap. It also keeps one
  `tools.video.VideoReader` per video (metadata and keyframe index from a single demux scan), so a
  run opens and scans each clip once instead of once per metadata / decode request. Work that
  several callers may ask for at once runs as one shared pool job per key (`shared_job`): motion
  tracks per (video, frames, points) (`atracks`), which lets the speculative grid track and the tool
  call that needs it be one computation, and the observe sample's encoding (`start_encoding`); the job
  table and its rules are `graph.shared_jobs`.
- The quality node starts encoding the observe sample's images (`start_encoding`) as soon as the
  sample is decoded, so the encoding overlaps the quality statistics and the model call finds its
  images ready; `ablocks` for those frames waits for that job instead of encoding them again. For a
  clip the quality check then zeroes, the encoding (~8 ms for 32 frames of 256x256) is wasted.
  Measured on the 2-core VM (agent_overhead, interleaved with the previous code): 3-7% less wall per
  clip (`overhead_over_frame_work` 2.79-2.82 vs 3.02-3.06 in three pairs on a quiet host);
  pipelining decoding and encoding frame by frame as well cost more than it saved (the second
  demuxer and GIL contention).
- `scaled_frames` decodes frames larger than a short-side bound straight to the smaller size (when
  that at least halves their pixels; otherwise the cached full-size frames serve, with no second
  decode) and does not cache them: the surprise scorer's input (up to 512 frames of a clip, 448 pixels on the
  short side) and the tracker's (576).
- Cached frames are separate arrays (`VideoReader.read_list`), so evicting one frees it.
- Every entry is filed under the video's `version`: its path and the file's identity (modification and
  change times in ns, size, inode). A clip rewritten at the same path (a script that writes
  `rollout.mp4` for every sample and scores it with one agent) is a new video: before this, the second
  clip was scored on the first one's cached frames. Requests served in worker threads stat the file
  (one `os.stat` each) and remember its version; those on the event loop (`ablocks`, track keys:
  `current`) use the remembered one, since a run's quality step stats its clip first and a stat on
  the loop is a blocking call. The old entries age out of the LRU maps.
- `forget` drops a clip's entries at once. Callers that delete their clips after scoring them (the
  trainer's `AgentReward` with temporary videos, the reward service without `--keep-videos`) call it,
  so a training process does not hold up to the cache's bound (~700 MB with the defaults) of frames of
  deleted files, which no later request can use since every batch writes to a new folder. Work still
  running for a forgotten clip does not put its entries back: the encoding job a zeroed clip's quality
  step started used to refill the cache after the reward service had forgotten the clip.
- A frame index that is not an integer (numpy integers are) raises `tools.video.FrameIndexError` naming the
  clip (`graph.frame_keys.frame_indices`). Keys, versions and the clip a key is filed under: `graph.frame_keys`.
- The `decoded` and `encoded` counters are updated under the store's lock: worker threads of concurrent runs
  decode and encode at once, and an unlocked `+=` is a read-modify-write that only the GIL's timing kept whole.
- A new data URL's sha256 (the stage-cache key's name for the image, `graph.cache_keys.url_digest`) is
  memoised in the worker thread that encoded it only once `keys_images` was called: a `graph.context.RunContext` calls
  it when its backbone has a stage cache. A store only agents without one use hashed every image it
  sent (~4% of a run's instructions) for keys nobody built. A cache's keys are the same either way: a
  digest not memoised here is computed when the key is built.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from graph.cache_keys import url_digest
from graph.frame_fork import watch
from graph.frame_keys import VideoKey, clip_path, encoding_key, file_version, forget_paths, frame_indices
from graph.lru import ByteLRU
from graph.shared_jobs import SharedJobs
from graph.workers import Lane, Priority, await_job, run_blocking

_MAX_READERS = 1024  # cached VideoReaders (metadata + keyframe index, no open file each)


class FrameStore:
    """Decoded-frame and data-URL cache over tools.video (shared by runs; bounded by bytes)."""

    def __init__(self, *, long_side: int = 512, quality: int = 85, max_bytes: int = 512 * 2**20) -> None:
        if isinstance(long_side, bool) or not isinstance(long_side, int) or long_side < 1:
            raise ValueError(f"long_side must be a positive number of pixels, got {long_side!r}")
        if isinstance(quality, bool) or not isinstance(quality, int) or not 1 <= quality <= 100:
            raise ValueError(f"JPEG quality must be an int in 1..100, got {quality!r}")
        self.long_side = long_side
        self.quality = quality
        self._frames = ByteLRU(max_bytes)
        self._urls = ByteLRU(max_bytes // 4)
        self._extra = ByteLRU(max_bytes // 8)
        self._readers: OrderedDict[VideoKey, Any] = OrderedDict()
        self._known: OrderedDict[str, VideoKey] = OrderedDict()  # path -> its version when last stat'ed
        self._jobs = SharedJobs()
        self._forgotten: OrderedDict[VideoKey, None] = OrderedDict()  # `forget`: never cached again
        self._lock = threading.Lock()
        self.decoded = 0
        self.encoded = 0
        self._digests = False  # `keys_images`
        watch(self)  # reset in a forked child (`after_fork`)

    def after_fork(self) -> None:
        """In a forked child: fresh locks and no shared jobs (why, and why none: `graph.frame_fork`)."""
        self._lock = threading.Lock()
        for lru in (self._frames, self._urls, self._extra):
            lru.after_fork()
        self._jobs.after_fork()

    def keys_images(self) -> None:
        """A stage cache keys the images this store sends: from now on memoise each new data URL's digest
        off the event loop, where it is encoded (module docstring). Never turned off (a shared store)."""
        self._digests = True

    @property
    def nbytes(self) -> int:
        """Bytes of decoded frames, data URLs and extras held now (what `max_bytes` bounds, with the
        URL and extra maps' shares)."""
        return sum(lru.nbytes for lru in (self._frames, self._urls, self._extra))

    def forget(self, videos: Iterable[str]) -> int:
        """Drop everything cached for the files at `videos` (every version): decoded frames, data URLs,
        extras, readers and shared jobs (a queued one is cancelled, a running one finishes unreferenced). For
        clips that are deleted once scored (a trainer's temporary rollouts, the reward service's
        requests), whose entries no later request can use. The versions it drops are never cached again:
        work still running for the clip (an encoding job the quality step started, a speculative track)
        finishes without putting its entries back; a file written anew at the path is a new version and
        is cached as usual. Returns the number of entries dropped. `videos` is a collection of paths (str or
        os.PathLike); a single path raises TypeError. An entry whose key names no clip is kept
        (`graph.frame_keys.clip_path`)."""
        gone = forget_paths(videos)

        def first(key: Any) -> bool:  # frames and URLs: (version, index, ...)
            return clip_path(key, 0) in gone

        def second(key: Any) -> bool:  # extras and shared jobs: (kind, version, ...)
            return clip_path(key, 1) in gone

        with self._lock:  # first, so that work still running for the clip cannot put entries back (`_put`)
            readers = [v for v in self._readers if v[0] in gone]
            for v in {*readers, *(self._known[p] for p in gone if p in self._known)}:
                self._forgotten[v] = None
                self._forgotten.move_to_end(v)
            while len(self._forgotten) > _MAX_READERS:
                self._forgotten.popitem(last=False)
            for v in readers:
                self._readers.pop(v).close_spare()
            for video in gone:
                self._known.pop(video, None)
        jobs = self._jobs.drop(second)  # after the versions are marked forgotten (graph.shared_jobs)
        dropped = self._frames.drop(first) + self._urls.drop(first) + self._extra.drop(second)
        return dropped + len(readers) + jobs

    def get_extra(self, key: Any) -> Any | None:
        """A cached derived artefact (e.g. motion overlays as content blocks), if present. Keys are
        tuples ``(kind, version, ...)`` with the clip's `current` version, as are shared jobs' keys
        (`forget` finds a clip's entries by it)."""
        return self._extra.get(key)

    def put_extra(self, key: Any, value: Any, size: int | None = None) -> None:
        """Cache a derived artefact: (content blocks, text), whose size is the length of its texts and image
        URLs (not of `str(block)`, which copied every base64 image once more on the event loop), or any
        other value with its approximate `size` in bytes (e.g. a tool's result)."""
        if size is None:
            size = len(value[1]) + sum(len(b.get("text", "")) + len((b.get("image_url") or {}).get("url", ""))
                                       for b in value[0])
        version = key[1] if isinstance(key, tuple) and len(key) > 1 else None  # documented keys: (kind, version, ...)
        self._put(self._extra, version, key, value, size)

    def _put(self, lru: ByteLRU, v: VideoKey | None, key: Any, value: Any, size: int) -> None:
        """Cache an entry of version `v`, unless `forget` dropped that version (see there)."""
        with self._lock:
            if v not in self._forgotten:
                lru.put(key, value, size)

    def shared_job(self, key: Any, compute: Callable[[], Any], priority: Priority = "now",
                   lane: Lane = "cpu") -> Future:
        """The one pool job computing what `key` identifies (e.g. motion tracks of video, frames, points),
        shared by everyone asking for the same key: a running or finished job is reused; a job still
        queued at priority "later" (a speculative prefetch) is cancelled and queued again at "now" when a
        caller at "now" needs it; a failed job is started afresh. `compute` runs in a worker thread
        (the table: `graph.shared_jobs`)."""
        return self._jobs.start(key, compute, priority, lane)[0]

    def started_job(self, key: Any) -> Future | None:
        """The shared job already started for `key` (running or done, failed included), or None when there
        is none, it was cancelled (`forget`) or it has left the bounded job table: for a stage that awaits
        exactly the job an earlier stage started, whatever its outcome."""
        job = self._jobs.get(key)
        return None if job is None or job.cancelled() else job

    async def atracks(self, key: Any, compute: Callable[[], Any], lane: Lane = "cpu") -> Any:
        """The result of the track job for `key`, needed now: a speculative ("later") job that fails
        while running is tried once more at "now", so its failure is never taken for the answer."""
        job, queued_at = self._jobs.start(key, compute, "now", lane)  # speculative or not: known before waiting
        try:
            return await await_job(job)
        except Exception:
            if queued_at != "later":
                raise
            # the retry: started here, or the one another waiter of the same failed job started first
            return await await_job(self.shared_job(key, compute, "now", lane))

    @staticmethod
    def version(video: str) -> VideoKey:
        """Key of every cache entry of `video`: path and file identity now (a rewritten file is another video)."""
        return file_version(video)

    def _refresh(self, video: str) -> VideoKey:
        """`version` of `video`, remembered as its current one (called off the event loop: it stats)."""
        v = self.version(video)
        with self._lock:
            self._known[video] = v
            self._known.move_to_end(video)
            while len(self._known) > _MAX_READERS:
                self._known.popitem(last=False)
        return v

    def current(self, video: str) -> VideoKey:
        """The version of `video` the last request that stat'ed it found, without touching the disk (for
        keys built on the event loop; a run's quality step stats its clip first). For a file no request
        has stat'ed yet (a run resumed or forked after its quality step, in a fresh process) it is
        ``(video, None)``: never a stat on the loop, and the first worker-side request files the rest
        under the real version."""
        with self._lock:
            v = self._known.get(video)
        return v if v is not None else (video, None)

    def _reader(self, v: VideoKey) -> Any:
        """The cached tools.video.VideoReader of version `v` (its one demux scan gives meta and the
        keyframe index; its first read reuses the scan's demuxer, later reads open their own, so one
        reader serves concurrent threads)."""
        from tools.video import VideoReader

        with self._lock:
            reader = self._readers.get(v)
            if reader is not None:
                self._readers.move_to_end(v)
                return reader
        reader = VideoReader(v[0])
        with self._lock:
            if v in self._forgotten:
                return reader
            self._readers[v] = reader
            while len(self._readers) > _MAX_READERS:
                self._readers.popitem(last=False)[1].close_spare()
        return reader

    def meta(self, video: str) -> Any:
        """tools.video.VideoMeta of `video` (cached); raises VideoError subclasses."""
        return self._reader(self._refresh(video)).meta

    def hdr(self, video: str) -> str | None:
        """The HDR transfer of `video` (tools.video.VideoReader.hdr: free once its frames were decoded here, else one
        keyframe decoded, once per reader); raises VideoError subclasses."""
        return self._reader(self._refresh(video)).hdr()

    def _ensure(self, v: VideoKey, wanted: set[int]) -> dict[int, np.ndarray]:
        """The frames at `wanted` of version `v`, decoding (in one pass) and caching those not cached."""
        cached = {i: self._frames.get((v, i)) for i in wanted}
        have = {i: f for i, f in cached.items() if f is not None}
        missing = sorted(i for i in wanted if i not in have)
        if missing:
            decoded = self._reader(v).read_list(missing)  # one array per frame: evicting it frees it
            for i, frame in zip(missing, decoded, strict=True):
                self._put(self._frames, v, (v, i), frame, frame.nbytes)
                have[i] = frame
            self._count(decoded=len(missing))
        return have

    def _count(self, *, decoded: int = 0, encoded: int = 0) -> None:
        """Add to the work counters, under the lock (module docstring)."""
        with self._lock:
            self.decoded += decoded
            self.encoded += encoded

    def fits(self, meta: Any, count: int, *, share: float) -> bool:
        """Whether `count` full-size frames of a clip with tools.video.VideoMeta `meta` take at most
        `share` of the frame cache's byte bound."""
        return count * meta.width * meta.height * 3 <= share * self._frames.max_bytes

    def prefetch(self, video: str, indices: Sequence[int]) -> None:
        """Decode and cache the frames at `indices` without building an array of them."""
        self._ensure(self._refresh(video), set(frame_indices(video, indices)))

    def frame_list(self, video: str, indices: Sequence[int]) -> list[np.ndarray]:
        """The cached frames at `indices` as a list (decoding only those not cached; no stacked copy)."""
        return self._frame_list(self._refresh(video), indices)

    def _frame_list(self, v: VideoKey, indices: Sequence[int]) -> list[np.ndarray]:
        wanted = frame_indices(v[0], indices)
        have = self._ensure(v, set(wanted))
        return [have[i] for i in wanted]

    def frames(self, video: str, indices: Sequence[int]) -> np.ndarray:
        """Frames [K,H,W,3] uint8 at `indices` (decoding only those not cached; a new stacked array)."""
        return self._stacked(self._refresh(video), indices)

    def _stacked(self, v: VideoKey, indices: Sequence[int]) -> np.ndarray:
        frames = self._frame_list(v, indices)
        return np.stack(frames) if frames else np.zeros((0, 1, 1, 3), np.uint8)

    def scaled_frames(self, video: str, indices: Sequence[int], short_side: int | None) -> np.ndarray:
        """Frames [K,h,w,3] uint8 at `indices` with the short side at most `short_side` (aspect kept),
        unless that would keep more than half the pixels (`tools.frames.tool_size`): those frames, like
        frames already that small, come from the cache; the others are decoded straight to the smaller
        size and not cached, so a long high-resolution clip never sits in memory at full size."""
        from tools.video import tool_size

        v = self._refresh(video)
        reader = self._reader(v)
        size = tool_size(reader.meta.width, reader.meta.height, short_side)
        if size == (reader.meta.width, reader.meta.height):
            return self._stacked(v, indices)
        return reader.read(indices, size=size)

    def image_blocks(self, video: str, indices: Sequence[int], *, box: Sequence[float] | None = None,
                     note: str = "", box_label: str | None = None) -> list[dict]:
        """Content blocks: per frame a text label then a JPEG data URL (crop applied when `box`, labelled
        `box_label` (the box as the model wrote it) or else as fractions of the frame)."""
        v = self._refresh(video)
        return self._image_blocks(v, frame_indices(v[0], indices), box=box, note=note, box_label=box_label)

    def _image_blocks(self, v: VideoKey, indices: Sequence[int], *, box: Sequence[float] | None = None, note: str = "",
                      box_label: str | None = None, cached: list[str | None] | None = None) -> list[dict]:
        """`image_blocks` of `v` at `indices` checked by `frame_indices`; `cached`: their data URLs, all
        cached (`_cached_urls`)."""
        from tools.video import crop_frame, crop_key, encode_jpeg_data_url, resize_long_side

        meta = self._reader(v).meta
        key_box = None if box is None else crop_key(box)
        urls = cached if cached is not None else [self._urls.get((v, i, key_box, self.long_side, self.quality))
                                                  for i in indices]
        todo = {i for i, u in zip(indices, urls, strict=True) if u is None}
        decoded = self._ensure(v, todo) if todo else {}
        crop = "" if key_box is None else f", crop {box_label or '[' + ', '.join(f'{b:.2f}' for b in key_box) + ']'}"
        blocks: list[dict] = []
        for i, url in zip(indices, urls, strict=True):
            if url is None:
                frame = decoded[i] if key_box is None else crop_frame(decoded[i], key_box)
                url = encode_jpeg_data_url(resize_long_side(frame, self.long_side), quality=self.quality)
                if self._digests:
                    url_digest(url)  # memoise the stage-key digest here, off the event loop
                self._put(self._urls, v, (v, i, key_box, self.long_side, self.quality), url, len(url))
                self._count(encoded=1)
            blocks.append({"type": "text", "text": meta.label(i) + crop + (f" ({note})" if note else "")})
            blocks.append({"type": "image_url", "image_url": {"url": url}})
        return blocks

    def array_blocks(self, frames: np.ndarray, labels: Sequence[str]) -> list[dict]:
        """Content blocks for already-rendered images (e.g. track overlays); not cached."""
        from tools.video import encode_jpeg_data_url, resize_long_side

        blocks: list[dict] = []
        for frame, label in zip(frames, labels, strict=True):
            url = encode_jpeg_data_url(resize_long_side(np.ascontiguousarray(frame), self.long_side),
                                       quality=self.quality)
            if self._digests:
                url_digest(url)  # memoise the stage-key digest here, off the event loop
            blocks += [{"type": "text", "text": label}, {"type": "image_url", "image_url": {"url": url}}]
        return blocks

    def start_encoding(self, video: str, indices: Sequence[int]) -> Future:
        """Encode and cache the full-frame data URLs of `indices` in a shared pool job (priority "first":
        observe's images, which the run's first model call waits for) and return it; while it runs, `ablocks`
        for the same frames waits for it instead of encoding them a second time. The job caches; it returns
        None (its failure, if any, is reported by whoever asks for the blocks next)."""
        v = self._refresh(video)
        key = encoding_key(v, frame_indices(v[0], indices))
        return self.shared_job(key, functools.partial(self._encode, key[1], key[2]), "first")

    def _encode(self, v: VideoKey, indices: tuple[int, ...]) -> None:
        self._image_blocks(v, indices)

    def _cached_urls(self, v: VideoKey, indices: Sequence[int], box: Sequence[float] | None) -> list[str | None] | None:
        """The data URLs of `indices` (checked) when all are cached and `v`'s reader is open, else None."""
        from tools.video import crop_key

        key_box = None if box is None else crop_key(box)
        with self._lock:
            if v not in self._readers:
                return None
        urls: list[str | None] = []
        for i in indices:
            if (url := self._urls.get((v, i, key_box, self.long_side, self.quality))) is None:
                return None
            urls.append(url)
        return urls

    async def ablocks(self, video: str, indices: Sequence[int], *, box: Sequence[float] | None = None,
                      note: str = "", box_label: str | None = None) -> list[dict]:
        """`image_blocks`, in a worker thread unless every image is already cached (waiting first for
        a `start_encoding` job of the same frames)."""
        indices = frame_indices(video, indices)  # refused here, on the loop, before any work is queued
        with self._lock:
            v = self._known.get(video)
        if v is None:  # no request of this file has looked at it yet: find its version off the loop
            return await run_blocking(self.image_blocks, video, indices, box=box, note=note, box_label=box_label)
        if box is None:
            job = self._jobs.get(encoding_key(v, indices))
            if job is not None and not job.done():
                with contextlib.suppress(Exception):  # a failed job: the call below reports the error
                    await await_job(job)
        if (urls := self._cached_urls(v, indices, box)) is not None:
            return self._image_blocks(v, indices, box=box, note=note, box_label=box_label, cached=urls)
        return await run_blocking(self._image_blocks, v, indices, box=box, note=note, box_label=box_label)

