/* A cordis:plugin/tools@0.1.0 guest in C, with no libc and no generated bindings: the
 * canonical ABI by hand (see docs/wasm-plugins.md). Tool `c_word_count` answers
 * {"words": N} for the words of its arguments' text (any run of non-space bytes between
 * quotes counts; a demo, not a JSON parser).
 *
 * Build (Debian: apt-get install clang lld), then turn the core module into a component:
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -o word_count.core.wasm word_count.c
 *   cargo run -p cordis-wasm --example build_guests -- examples/wasm/c
 */

typedef unsigned int u32;
typedef unsigned char u8;

#define EXPORT(name) __attribute__((export_name(name)))

static u8 heap[64 * 1024];
static u32 top;

EXPORT("cabi_realloc")
void *cabi_realloc(void *old, u32 old_size, u32 align, u32 size) {
    (void)old;
    (void)old_size;
    top = (top + align - 1) & ~(align - 1);
    if (top + size > sizeof heap) __builtin_trap();
    void *p = &heap[top];
    top += size;
    return p;
}

/* result<string, string> and result<_, string>: tag, then (ptr, len) at offset 4. */
static struct { u8 tag; u8 pad[3]; const u8 *ptr; u32 len; } ret;

static const u8 *lit(const char *s, u32 *len) {
    u32 n = 0;
    while (s[n]) n++;
    *len = n;
    return (const u8 *)s;
}

struct tool { const u8 *name; u32 name_len; const u8 *desc; u32 desc_len;
              const u8 *params; u32 params_len; u8 effect; u8 pad[3]; };
static struct tool tools[1];
static struct { struct tool *ptr; u32 len; } list;

EXPORT("cordis:plugin/guest@0.1.0#init")
void *init(const u8 *config, u32 len) {
    (void)config;
    (void)len;
    ret.tag = 0;
    return &ret;
}

EXPORT("cordis:plugin/guest@0.1.0#describe")
void *describe(void) {
    tools[0].name = lit("c_word_count", &tools[0].name_len);
    tools[0].desc = lit("Counts the words of a text (a C guest).", &tools[0].desc_len);
    tools[0].params = lit("{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}", &tools[0].params_len);
    tools[0].effect = 0; /* read */
    list.ptr = tools;
    list.len = 1;
    return &list;
}

static u8 out[32];

EXPORT("cordis:plugin/guest@0.1.0#call")
void *call(const u8 *name, u32 name_len, const u8 *args, u32 args_len) {
    (void)name;
    (void)name_len;
    /* The value of the last string in the arguments: the text. */
    u32 start = 0, end = 0, quotes = 0;
    for (u32 i = 0; i < args_len; i++) {
        if (args[i] == '"') {
            quotes++;
            if (quotes % 2 == 1) start = i + 1; else end = i;
        }
    }
    u32 words = 0;
    int in_word = 0;
    for (u32 i = start; i < end; i++) {
        int space = args[i] == ' ' || args[i] == '\t' || args[i] == '\n';
        if (!space && !in_word) words++;
        in_word = !space;
    }
    /* {"words":N} */
    u32 n = 0;
    const char *pre = "{\"words\":";
    while (*pre) out[n++] = (u8)*pre++;
    u8 digits[10];
    u32 d = 0;
    do { digits[d++] = (u8)('0' + words % 10); words /= 10; } while (words);
    while (d) out[n++] = digits[--d];
    out[n++] = '}';
    top = 0; /* arguments are read: the heap can be reused by the next call */
    ret.tag = 0;
    ret.ptr = out;
    ret.len = n;
    return &ret;
}
