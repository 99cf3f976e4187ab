/* One Perfetto trace of an MPI job: the ranks' traces (trace-<rank>.pftrace)
 * written by `strata merge` as one file, one process track a rank.
 *
 * Every packet of every rank is copied as it is but for its
 * trusted_packet_sequence_id, moved into a range of its own (the i-th file's
 * sequence s becomes s + i * 65536), so that the ranks' sequences, their interned
 * names and incremental timestamps stay apart. Track uuids come from the process
 * id in strata's traces, so the ranks' tracks are apart too.
 *
 * Clocks. A trace stamps its events with its host's CLOCK_MONOTONIC, and its first
 * clock snapshot relates that to CLOCK_BOOTTIME and CLOCK_REALTIME. Ranks of the
 * first file's host (REALTIME less BOOTTIME within a millisecond of its) are
 * copied as they are: they share the clocks. A file of another host gets a
 * MONOTONIC of its own (clock id 128 + its index, in its snapshots and its
 * timestamps), and its BOOTTIME readings are moved by the difference of the two
 * hosts' REALTIME less BOOTTIME, so that every rank lands on the first host's
 * BOOTTIME by the wall clock: aligned as well as the hosts' wall clocks agree
 * (NTP: usually within a millisecond). A trace without REALTIME (strata before
 * it) is copied as it is. Streamed: one packet in memory at a time. */
#ifndef STRATA_OUTPUT_PTMERGE_H
#define STRATA_OUTPUT_PTMERGE_H

#include <stddef.h>

#include "base/err.h"
#include "base/strbuf.h"

/* The most files merged into one trace (sequence ranges of 65536). */
#define ST_PTMERGE_MAX 65535

/* Appends the merged trace of the n files to out (a streaming buffer). Returns 0,
 * ST_EIO (a file unreadable or not a Perfetto trace: msg names it) or ST_EINVAL
 * (too many files). */
int st_ptmerge_write(st_strbuf_t *out, const char *const *paths, size_t n, st_msg_t *msg);

#endif
