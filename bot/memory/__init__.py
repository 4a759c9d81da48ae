"""The team's own memory: resolved threads (and `ncclbot incidents add`) become local
incidents in the state database, in the shape of `knowledge/incidents/`, redacted and
bounded; the nearest-incident channel and "seen before" use them at once, on every
replica (`bot.memory.runtime`)."""
