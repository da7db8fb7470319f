-- The table of queue pgi (ferryd.ini here): test_wait.py reads its rows.
CREATE TABLE waits (n bigint NOT NULL);
