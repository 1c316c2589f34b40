-- Version 6: the runs table loses its indexes on process and on event.
-- Each was written by every admission (an emit's commit wrote five b-tree
-- pages: the table, the id, status, process and event indexes) for the
-- sake of listings alone. Without them an admission writes three, which
-- is a third less WAL per emit and a shorter commit. A listing filtered
-- by process or event now reads the status index for one status other
-- than completed, and otherwise the table in seq order, the order it
-- lists in; such a read runs until its caller's deadline (the HTTP API
-- and the dashboard give every read one: QueryTimeout). The count
-- of a process's active runs, taken once per process by a capped
-- admission, reads the idle and running runs of the status index.
DROP INDEX runs_process;
DROP INDEX runs_event;
