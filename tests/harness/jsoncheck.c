/* jsoncheck FILE [KEY...]: exit 0 when FILE parses as JSON (or as JSON lines with -l)
 * and, for each KEY, the top-level object has it. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int lines = argc > 1 && !strcmp(argv[1], "-l");
    if (argc < 2 + lines) { fprintf(stderr, "usage: jsoncheck [-l] FILE [KEY...]\n"); return 2; }
    FILE *f = fopen(argv[1 + lines], "rb");
    if (!f) { fprintf(stderr, "jsoncheck: cannot open %s\n", argv[1 + lines]); return 1; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) return 1;
    buf[len] = 0;
    fclose(f);
    if (lines) {
        int n = 0;
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"), n++) {
            cJSON *j = cJSON_Parse(line);
            if (!j) { fprintf(stderr, "jsoncheck: line %d is not JSON\n", n + 1); return 1; }
            cJSON_Delete(j);
        }
        return n > 0 ? 0 : 1;
    }
    cJSON *j = cJSON_Parse(buf);
    if (!j) { fprintf(stderr, "jsoncheck: %s is not valid JSON\n", argv[1]); return 1; }
    for (int i = 2; i < argc; i++)
        if (!cJSON_GetObjectItemCaseSensitive(j, argv[i])) { fprintf(stderr, "jsoncheck: no key %s\n", argv[i]); return 1; }
    cJSON_Delete(j);
    return 0;
}
