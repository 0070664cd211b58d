/* Named nodes: what a capture knows of a node it named, and the changes
 * an executable graph makes to it by name. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "error.h"
#include "node-names.h"
#include "reaper.h"

#define NAME_MAX_LENGTH 63
#define MAX_ARGUMENTS 1024

/* A kernel's launch parameters and argument values. */
struct kernel_args {
    CUDA_KERNEL_NODE_PARAMS params;  /* kernelParams points into pointers */
    size_t count;                    /* the kernel's parameters */
    size_t *sizes;
    void **pointers;                 /* each into values */
    unsigned char *values;
    size_t values_size;
};

struct named_node {
    char name[NAME_MAX_LENGTH + 1];
    CUgraphNode node;                /* in the graph the capture made */
    CUgraphNodeType type;
    union {
        struct kernel_args kernel;
        CUDA_MEMCPY3D copy;
        CUDA_MEMSET_NODE_PARAMS memset;
    } u;
    int stale;                       /* the executable graph's values came from a capture that did not name it */
    struct cucap_reaped *owned;      /* an executable graph's: the host callback's data it set */
    struct named_node *next;
};

struct cucap_node_names {
    struct named_node *first;
    struct cucap_reaped *retired;    /* data replaced while launches that may run it were not done */
};

/* ---------------------------------------------------------------- the list */

static void free_node(struct named_node *n)
{
    if (!n)
        return;
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        free(n->u.kernel.sizes);
        free(n->u.kernel.pointers);
        free(n->u.kernel.values);
    }
    free(n);
}

static void chain(struct cucap_reaped **to, struct cucap_reaped *item)
{
    if (item) {
        item->next = *to;
        *to = item;
    }
}

struct cucap_reaped *cucap_i_names_free(struct cucap_node_names *list)
{
    struct cucap_reaped *owned;

    if (!list)
        return NULL;
    owned = list->retired;
    while (list->first) {
        struct named_node *n = list->first;
        list->first = n->next;
        chain(&owned, n->owned);
        free_node(n);
    }
    free(list);
    return owned;
}

static struct named_node *find(const struct cucap_node_names *list, const char *name)
{
    struct named_node *n;

    for (n = list ? list->first : NULL; n; n = n->next)
        if (!strcmp(n->name, name))
            return n;
    return NULL;
}

int cucap_i_names_own_data(const struct cucap_node_names *list)
{
    const struct named_node *n;

    if (!list)
        return 0;
    for (n = list->first; n; n = n->next)
        if (n->owned)
            return 1;
    return list->retired != NULL;
}

void cucap_i_names_launches_done(struct cucap_node_names *list)
{
    struct cucap_reaped *item;

    while (list && (item = list->retired) != NULL) {
        list->retired = item->next;
        item->next = NULL;
        cucap_i_reap(item);
    }
}

/* ---------------------------------------------------------------- naming */

/* The kernel's parameters, from the driver: their count, sizes and
 * offsets, and room for their values, filled from the node's. */
static CUresult describe_kernel(struct kernel_args *k, const char *caller, cucap_error **err)
{
    size_t offset, size, end = 0, i;

    if (!cucap_i_drv.cuFuncGetParamInfo)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: naming a kernel needs a driver of CUDA 12.4 or "
                            "newer (cuFuncGetParamInfo)", caller);
    if (!k->params.func)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: the kernel node has no function the driver can "
                            "describe", caller);
    if (!k->params.kernelParams)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: the kernel was launched with its arguments in "
                            "`extra`; only kernelParams launches can be named", caller);
    /* the driver answers INVALID_VALUE past the last parameter */
    while (k->count < MAX_ARGUMENTS &&
           cucap_i_drv.cuFuncGetParamInfo(k->params.func, k->count, &offset, &size) == CUDA_SUCCESS) {
        if (offset + size > end)
            end = offset + size;
        k->count++;
    }
    k->values_size = end ? end : 1;
    if ((k->count && (!(k->sizes = calloc(k->count, sizeof *k->sizes)) ||
                      !(k->pointers = calloc(k->count, sizeof *k->pointers)))) ||
        !(k->values = calloc(1, k->values_size)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    for (i = 0; i < k->count; i++) {
        CUresult rc = cucap_i_drv.cuFuncGetParamInfo(k->params.func, i, &offset, &size);
        if (rc != CUDA_SUCCESS)
            return cucap_i_fail_driver(err, rc, caller, "cuFuncGetParamInfo");
        k->sizes[i] = size;
        k->pointers[i] = k->values + offset;
        memcpy(k->pointers[i], k->params.kernelParams[i], size);
    }
    k->params.kernelParams = k->pointers;
    k->params.extra = NULL;
    return CUDA_SUCCESS;
}

static const char *article(const char *word)
{
    return strchr("aeiou", word[0]) ? "an" : "a";
}

/* What an executable graph will need of n, read from the driver. */
static CUresult describe(struct named_node *n, const char *caller, cucap_error **err)
{
    CUresult rc;

    switch (n->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        if ((rc = cucap_i_drv.cuGraphKernelNodeGetParams(n->node, &n->u.kernel.params)) != CUDA_SUCCESS)
            return cucap_i_fail_driver(err, rc, caller, "cuGraphKernelNodeGetParams");
        return describe_kernel(&n->u.kernel, caller, err);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if ((rc = cucap_i_drv.cuGraphMemcpyNodeGetParams(n->node, &n->u.copy)) != CUDA_SUCCESS)
            return cucap_i_fail_driver(err, rc, caller, "cuGraphMemcpyNodeGetParams");
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if ((rc = cucap_i_drv.cuGraphMemsetNodeGetParams(n->node, &n->u.memset)) != CUDA_SUCCESS)
            return cucap_i_fail_driver(err, rc, caller, "cuGraphMemsetNodeGetParams");
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_HOST:
    case CU_GRAPH_NODE_TYPE_GRAPH:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return CUDA_SUCCESS;   /* replaced whole, or only enabled and disabled */
    default:
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the last work captured on the builder's stream made "
                            "%s %s node, which an executable graph cannot change: name a kernel, memcpy, memset, "
                            "host callback, embedded graph, event record or wait, or conditional node", caller,
                            article(cucap_i_node_type_text(n->type)), cucap_i_node_type_text(n->type));
    }
}

/* The one node the last work captured on s made. */
static CUresult last_node(CUstream s, CUgraphNode *node, const char *caller, cucap_error **err)
{
    CUstreamCaptureStatus status;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    CUresult rc;

    rc = cucap_i_drv.cuStreamGetCaptureInfo(s, &status, NULL, NULL, &deps, &edges, &n);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s: the capture was invalidated; end it",
                            caller);
    if (n != 1)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the builder's stream %s: name a node right after "
                            "the work that made it", caller, n ? "waits on several nodes (a join or a wait came "
                            "after that work)" : "has captured nothing yet");
    *node = deps[0];
    return CUDA_SUCCESS;
}

CUresult cucap_i_names_add(struct cucap_node_names **list, CUstream s, const char *name, const char *caller,
                           cucap_error **err)
{
    struct named_node *n;
    CUgraphNode node = NULL;
    CUgraphNodeType type;
    CUresult rc;

    if (!name || !*name)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is %s", caller, name ? "empty" : "NULL");
    if (strlen(name) > NAME_MAX_LENGTH)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is longer than %d characters", caller,
                            NAME_MAX_LENGTH);
    if (find(*list, name))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the capture already has a node named \"%s\"",
                            caller, name);
    if ((rc = last_node(s, &node, caller, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_drv.cuGraphNodeGetType(node, &type)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuGraphNodeGetType");
    if (!(n = calloc(1, sizeof *n)) || (!*list && !(*list = calloc(1, sizeof **list)))) {
        free(n);
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    n->node = node;
    n->type = type;
    if ((rc = describe(n, caller, err)) != CUDA_SUCCESS) {
        free_node(n);
        return rc;
    }
    strcpy(n->name, name);
    n->next = (*list)->first;
    (*list)->first = n;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- executable graphs' copies */

static int copy_kernel(struct kernel_args *k, const struct kernel_args *from)
{
    size_t i;

    *k = *from;
    k->sizes = NULL;
    k->pointers = NULL;
    if ((k->count && !(k->sizes = malloc(k->count * sizeof *k->sizes))) || !(k->values = malloc(from->values_size)) ||
        (k->count && !(k->pointers = malloc(k->count * sizeof *k->pointers))))
        return -1;
    memcpy(k->values, from->values, from->values_size);
    for (i = 0; i < k->count; i++) {
        k->sizes[i] = from->sizes[i];
        k->pointers[i] = k->values + ((unsigned char *)from->pointers[i] - from->values);
    }
    k->params.kernelParams = k->pointers;
    return 0;
}

static struct named_node *copy_node(const struct named_node *from)
{
    struct named_node *n = malloc(sizeof *n);

    if (!n)
        return NULL;
    *n = *from;
    n->owned = NULL;
    n->next = NULL;
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        n->u.kernel.values = NULL;
        if (copy_kernel(&n->u.kernel, &from->u.kernel) != 0) {
            free_node(n);
            return NULL;
        }
    }
    return n;
}

CUresult cucap_i_names_copy(const struct cucap_node_names *list, struct cucap_node_names **out, const char *caller,
                            cucap_error **err)
{
    const struct named_node *from;
    struct named_node **tail;

    *out = NULL;
    if (!list || !list->first)
        return CUDA_SUCCESS;
    if (!(*out = calloc(1, sizeof **out)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    for (tail = &(*out)->first, from = list->first; from; from = from->next, tail = &(*tail)->next)
        if (!(*tail = copy_node(from))) {
            (void)cucap_i_names_free(*out);
            *out = NULL;
            return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
        }
    return CUDA_SUCCESS;
}

static int same_shape(const struct named_node *a, const struct named_node *b)
{
    const struct kernel_args *x = &a->u.kernel, *y = &b->u.kernel;

    if (a->type != b->type)
        return 0;
    if (a->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return 1;
    return x->count == y->count && x->values_size == y->values_size &&
           (!x->count || !memcmp(x->sizes, y->sizes, x->count * sizeof *x->sizes));
}

void cucap_i_names_updated(struct cucap_node_names *list, const struct cucap_node_names *source)
{
    struct named_node *n;

    for (n = list ? list->first : NULL; n; n = n->next) {
        const struct named_node *from = find(source, n->name);
        /* the graph now runs the updating capture's callback and data */
        chain(&list->retired, n->owned);
        n->owned = NULL;
        if (!from || !same_shape(n, from)) {
            n->stale = 1;
            continue;
        }
        n->stale = 0;
        /* the node stays this graph's: the driver knows the executable's nodes by it */
        if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            void **pointers = n->u.kernel.pointers;
            memcpy(n->u.kernel.values, from->u.kernel.values, n->u.kernel.values_size);
            n->u.kernel.params = from->u.kernel.params;
            n->u.kernel.params.kernelParams = pointers;
        } else if (n->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
            n->u.copy = from->u.copy;
        } else if (n->type == CU_GRAPH_NODE_TYPE_MEMSET) {
            n->u.memset = from->u.memset;
        }
    }
}

/* ---------------------------------------------------------------- changes by name */

static const char *kind_text(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_HOST ? "host callback" : t == CU_GRAPH_NODE_TYPE_GRAPH ? "embedded graph"
                                                                                          : cucap_i_node_type_text(t);
}

/* The node called c->name, of type want0 or want1, and with `values` one
 * whose values are known. */
static CUresult lookup(struct cucap_node_names *list, const struct cucap_node_change *c, CUgraphNodeType want0,
                       CUgraphNodeType want1, int values, struct named_node **out, cucap_error **err)
{
    struct named_node *n;

    if (!c->name)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is NULL", c->caller);
    if (!(n = find(list, c->name)))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph's capture named no node \"%s\"", c->caller,
                            c->name);
    if (n->type != want0 && n->type != want1)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: node \"%s\" is %s %s node, not %s %s node", c->caller,
                            c->name, article(kind_text(n->type)), kind_text(n->type), article(kind_text(want0)),
                            want0 == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? "event record or wait" : kind_text(want0));
    if (values && n->stale)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the executable graph was updated from a capture "
                            "that did not name the %s node \"%s\" of the same shape: its values are not known",
                            c->caller, kind_text(n->type), c->name);
    *out = n;
    return CUDA_SUCCESS;
}

CUresult cucap_i_names_set_kernel_arg(struct cucap_node_names *list, const struct cucap_node_change *c,
                                      unsigned int index, const void *value, size_t size, cucap_error **err)
{
    struct named_node *n;
    struct kernel_args *k;
    void *kept;
    CUresult rc;

    if ((rc = lookup(list, c, CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_KERNEL, 1, &n, err)) != CUDA_SUCCESS)
        return rc;
    k = &n->u.kernel;
    if (index >= k->count)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: kernel \"%s\" has %zu parameters; there is no "
                            "parameter %u", c->caller, c->name, k->count, index);
    if (size != k->sizes[index])
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: parameter %u of kernel \"%s\" is %zu bytes, not %zu",
                            c->caller, index, c->name, k->sizes[index], size);
    if (!value)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the value is NULL", c->caller);
    /* the driver copies the arguments at the call: the new one is read
     * where the caller has it, and kept only once the driver took it */
    kept = k->pointers[index];
    k->pointers[index] = (void *)value;
    rc = cucap_i_drv.cuGraphExecKernelNodeSetParams(c->exec, n->node, &k->params);
    k->pointers[index] = kept;
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, c->caller, "cuGraphExecKernelNodeSetParams");
    memcpy(kept, value, size);
    return CUDA_SUCCESS;
}

/* One side of a copy at address p, of the memory type the capture gave it. */
static void set_operand(CUmemorytype type, const void **host, CUdeviceptr *device, CUdeviceptr p)
{
    if (type == CU_MEMORYTYPE_HOST)
        *host = (const void *)(uintptr_t)p;
    else
        *device = p;
}

CUresult cucap_i_names_set_memcpy(struct cucap_node_names *list, const struct cucap_node_change *c, CUdeviceptr dst,
                                  CUdeviceptr src, size_t size, cucap_error **err)
{
    struct named_node *n;
    CUDA_MEMCPY3D p;
    CUresult rc;

    if ((rc = lookup(list, c, CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_MEMCPY, 1, &n, err)) != CUDA_SUCCESS)
        return rc;
    p = n->u.copy;
    if (p.Height > 1 || p.Depth > 1 || p.srcMemoryType == CU_MEMORYTYPE_ARRAY || p.dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: memcpy \"%s\" is not a one-dimensional copy between "
                            "addresses; the driver changes only those", c->caller, c->name);
    if (!dst || !src || !size)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: %s", c->caller,
                            !size ? "a copy of 0 bytes (the driver refuses one)" : "dst or src is 0");
    p.srcXInBytes = p.srcY = p.srcZ = p.srcLOD = 0;
    p.dstXInBytes = p.dstY = p.dstZ = p.dstLOD = 0;
    set_operand(p.srcMemoryType, &p.srcHost, &p.srcDevice, src);
    set_operand(p.dstMemoryType, (const void **)&p.dstHost, &p.dstDevice, dst);
    p.WidthInBytes = size;
    if ((rc = cucap_i_drv.cuGraphExecMemcpyNodeSetParams(c->exec, n->node, &p, c->ctx)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, c->caller, "cuGraphExecMemcpyNodeSetParams (the new operands must be "
                                   "memory of the same kind and context as the captured ones)");
    n->u.copy = p;
    return CUDA_SUCCESS;
}

CUresult cucap_i_names_set_memset(struct cucap_node_names *list, const struct cucap_node_change *c, CUdeviceptr dst,
                                  unsigned int value, cucap_error **err)
{
    struct named_node *n;
    CUDA_MEMSET_NODE_PARAMS p;
    CUresult rc;

    if ((rc = lookup(list, c, CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_MEMSET, 1, &n, err)) != CUDA_SUCCESS)
        return rc;
    p = n->u.memset;
    if (p.height > 1)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: memset \"%s\" is two-dimensional; the driver changes "
                            "only one-dimensional ones", c->caller, c->name);
    if (!dst)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: dst is 0", c->caller);
    if (p.elementSize < 4 && value >> (8 * p.elementSize))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: memset \"%s\" writes %u-byte elements; 0x%x does not "
                            "fit", c->caller, c->name, p.elementSize, value);
    p.dst = dst;
    p.value = value;
    if ((rc = cucap_i_drv.cuGraphExecMemsetNodeSetParams(c->exec, n->node, &p, c->ctx)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, c->caller, "cuGraphExecMemsetNodeSetParams (the new destination must be "
                                   "memory of the captured one's context)");
    n->u.memset = p;
    return CUDA_SUCCESS;
}

CUresult cucap_i_names_set_host_callback(struct cucap_node_names *list, const struct cucap_node_change *c,
                                         CUhostFn fn, void *data, CUhostFn free_data, cucap_error **err)
{
    CUDA_HOST_NODE_PARAMS p = { fn, data };
    struct cucap_reaped *owned = NULL;
    struct named_node *n = NULL;
    CUresult rc;

    if ((rc = lookup(list, c, CU_GRAPH_NODE_TYPE_HOST, CU_GRAPH_NODE_TYPE_HOST, 0, &n, err)) != CUDA_SUCCESS)
        return rc;
    if (!fn)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: fn is NULL", c->caller);
    if (free_data && !(owned = malloc(sizeof *owned)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", c->caller);
    if ((rc = cucap_i_drv.cuGraphExecHostNodeSetParams(c->exec, n->node, &p)) != CUDA_SUCCESS) {
        free(owned);
        return cucap_i_fail_driver(err, rc, c->caller, "cuGraphExecHostNodeSetParams");
    }
    if (owned)
        *owned = (struct cucap_reaped){ NULL, free_data, data };
    if (c->launches_done && n->owned)
        cucap_i_reap(n->owned);
    else
        chain(&list->retired, n->owned);
    n->owned = owned;
    return CUDA_SUCCESS;
}

CUresult cucap_i_names_set_child_graph(struct cucap_node_names *list, const struct cucap_node_change *c,
                                       CUgraph graph, cucap_error **err)
{
    struct named_node *n;
    CUresult rc;

    if ((rc = lookup(list, c, CU_GRAPH_NODE_TYPE_GRAPH, CU_GRAPH_NODE_TYPE_GRAPH, 0, &n, err)) != CUDA_SUCCESS)
        return rc;
    if ((rc = cucap_i_drv.cuGraphExecChildGraphNodeSetParams(c->exec, n->node, graph)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, c->caller, "cuGraphExecChildGraphNodeSetParams (the new graph must have "
                                   "the embedded one's nodes, edges and order)");
    return CUDA_SUCCESS;
}

CUresult cucap_i_names_set_event(struct cucap_node_names *list, const struct cucap_node_change *c, CUevent event,
                                 cucap_error **err)
{
    struct named_node *n;
    CUresult rc;

    if ((rc = lookup(list, c, CU_GRAPH_NODE_TYPE_EVENT_RECORD, CU_GRAPH_NODE_TYPE_WAIT_EVENT, 0, &n, err)) !=
        CUDA_SUCCESS)
        return rc;
    if (!event)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the event is NULL", c->caller);
    if (n->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
        rc = cucap_i_drv.cuGraphExecEventRecordNodeSetEvent(c->exec, n->node, event);
    else
        rc = cucap_i_drv.cuGraphExecEventWaitNodeSetEvent(c->exec, n->node, event);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, c->caller, n->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                   ? "cuGraphExecEventRecordNodeSetEvent" : "cuGraphExecEventWaitNodeSetEvent");
    return CUDA_SUCCESS;
}

CUresult cucap_i_names_set_enabled(struct cucap_node_names *list, const struct cucap_node_change *c, int enabled,
                                   cucap_error **err)
{
    struct named_node *n;
    CUresult rc;

    if (!c->name)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is NULL", c->caller);
    if (!(n = find(list, c->name)))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph's capture named no node \"%s\"", c->caller,
                            c->name);
    if (n->type != CU_GRAPH_NODE_TYPE_KERNEL && n->type != CU_GRAPH_NODE_TYPE_MEMCPY &&
        n->type != CU_GRAPH_NODE_TYPE_MEMSET)
        return cucap_i_fail(err, CUDA_ERROR_NOT_SUPPORTED, "%s: node \"%s\" is %s %s node; the driver enables and "
                            "disables only kernel, memcpy and memset nodes", c->caller, c->name,
                            article(kind_text(n->type)), kind_text(n->type));
    if ((rc = cucap_i_drv.cuGraphNodeSetEnabled(c->exec, n->node, enabled ? 1 : 0)) != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, c->caller, "cuGraphNodeSetEnabled");
    return CUDA_SUCCESS;
}
