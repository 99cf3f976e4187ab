/* The version of profile.json (docs/formats.md): what the writer puts in
 * "format_version" and the newest the reader accepts. A reader of version N reads
 * every earlier version. */
#ifndef STRATA_MODEL_VERSION_H
#define STRATA_MODEL_VERSION_H

#define ST_PROFILE_FORMAT_VERSION 2

#endif
