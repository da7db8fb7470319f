-- The table of queue pgi (test/ferryd.ini): wait.test.js reads its rows.
CREATE TABLE waits (n bigint NOT NULL);
