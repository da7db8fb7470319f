/* web.h - the dashboard's CSS and JavaScript (src/ferryd/http/web), embedded at build
 * time by scripts/embed-web into web_files.c; http_dashboard.c puts them
 * inline in the page. */
#ifndef FERRY_WEB_H
#define FERRY_WEB_H

extern const char web_dashboard_css[];
extern const char web_dashboard_js[];

#endif
