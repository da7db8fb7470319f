CREATE TABLE page_views (
    user_id   bigint      NOT NULL,
    path      text        NOT NULL,
    viewed_at timestamptz NOT NULL
);
