/* One Perfetto trace of an MPI job: the ranks' traces (trace-<rank>.pftrace)
 * written by `strata merge` as one file, one process track a rank.
 *
 * Every packet of every rank is copied as it is but for its
 * trusted_packet_sequence_id, moved into a range of its own (the i-th file's
 * sequence s becomes s + i * 65536), so that the ranks' sequences, their interned
 * names and incremental timestamps stay apart. Track uuids come from the process
 * id in strata's traces, so the ranks' tracks are apart too. The timestamps are
 * each host's clocks (CLOCK_MONOTONIC and CLOCK_BOOTTIME, with the snapshot that
 * relates them): ranks of one host line up exactly; ranks of several hosts are each
 * on their host's clock. Streamed: one packet in memory at a time. */
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
