-- Version 5: the two timeline entries of a run's first attempt, when that
-- attempt completed it, are implicit, read from the run's row like the
-- admission: such a run has no timeline row (a completed run with tl = 3
-- and no row), which is most runs. Rows written before this version stay
-- and are read as before, so no data moves; the version changes so that a
-- build that would read those timelines as the admission alone refuses
-- the schema instead.
SELECT 1;
