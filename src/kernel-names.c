/* Named kernels: what a capture knows of a kernel node it named, and the
 * argument changes an executable graph makes to it. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "error.h"
#include "kernel-names.h"

#define NAME_MAX_LENGTH 63
#define MAX_ARGUMENTS 1024

struct named_kernel {
    char name[NAME_MAX_LENGTH + 1];
    CUgraphNode node;                /* in the graph the capture made */
    CUDA_KERNEL_NODE_PARAMS params;  /* kernelParams points into pointers */
    size_t count;                    /* the kernel's parameters */
    size_t *sizes;
    void **pointers;                 /* each into values */
    unsigned char *values;
    size_t values_size;
    int stale;                       /* the executable graph's values came from a capture that did not name it */
    struct named_kernel *next;
};

struct cucap_kernels {
    struct named_kernel *first;
};

static void free_kernel(struct named_kernel *k)
{
    if (!k)
        return;
    free(k->sizes);
    free(k->pointers);
    free(k->values);
    free(k);
}

void cucap_i_kernels_free(struct cucap_kernels *list)
{
    if (!list)
        return;
    while (list->first) {
        struct named_kernel *k = list->first;
        list->first = k->next;
        free_kernel(k);
    }
    free(list);
}

static struct named_kernel *find(const struct cucap_kernels *list, const char *name)
{
    struct named_kernel *k;

    for (k = list ? list->first : NULL; k; k = k->next)
        if (!strcmp(k->name, name))
            return k;
    return NULL;
}

/* The kernel's parameters, from the driver: their count, sizes and
 * offsets, and room for their values, filled from the node's. */
static CUresult describe(struct named_kernel *k, const char *caller, cucap_error **err)
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

CUresult cucap_i_kernels_name(struct cucap_kernels **list, CUstream s, const char *name, const char *caller,
                              cucap_error **err)
{
    CUstreamCaptureStatus status;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    CUgraphNodeType type;
    struct named_kernel *k;
    size_t n = 0;
    CUresult rc;

    if (!name || !*name)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is %s", caller, name ? "empty" : "NULL");
    if (strlen(name) > NAME_MAX_LENGTH)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is longer than %d characters", caller,
                            NAME_MAX_LENGTH);
    if (find(*list, name))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the capture already has a kernel named \"%s\"",
                            caller, name);
    rc = cucap_i_drv.cuStreamGetCaptureInfo(s, &status, NULL, NULL, &deps, &edges, &n);
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuStreamGetCaptureInfo");
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return cucap_i_fail(err, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "%s: the capture was invalidated; end it",
                            caller);
    if (n != 1 || (rc = cucap_i_drv.cuGraphNodeGetType(deps[0], &type)) != CUDA_SUCCESS ||
        type != CU_GRAPH_NODE_TYPE_KERNEL) {
        if (n == 1 && rc == CUDA_SUCCESS)
            return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the last work captured on the builder's stream "
                                "made a %s node, not a kernel node: name a kernel right after its launch", caller,
                                cucap_i_node_type_text(type));
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the builder's stream %s: name a kernel right after "
                            "its launch", caller, n ? "waits on several nodes (a join or a wait came after the "
                            "launch)" : "has captured nothing yet");
    }
    if (!(k = calloc(1, sizeof *k)) || (!*list && !(*list = calloc(1, sizeof **list)))) {
        free(k);
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    }
    k->node = deps[0];
    if ((rc = cucap_i_drv.cuGraphKernelNodeGetParams(k->node, &k->params)) != CUDA_SUCCESS) {
        free_kernel(k);
        return cucap_i_fail_driver(err, rc, caller, "cuGraphKernelNodeGetParams");
    }
    if ((rc = describe(k, caller, err)) != CUDA_SUCCESS) {
        free_kernel(k);
        return rc;
    }
    strcpy(k->name, name);
    k->next = (*list)->first;
    (*list)->first = k;
    return CUDA_SUCCESS;
}

static struct named_kernel *copy_kernel(const struct named_kernel *from)
{
    struct named_kernel *k = calloc(1, sizeof *k);
    size_t i;

    if (!k)
        return NULL;
    *k = *from;
    k->sizes = NULL;
    k->pointers = NULL;
    k->values = NULL;
    k->next = NULL;
    if ((k->count && !(k->sizes = malloc(k->count * sizeof *k->sizes))) || !(k->values = malloc(from->values_size)) ||
        (k->count && !(k->pointers = malloc(k->count * sizeof *k->pointers)))) {
        free_kernel(k);
        return NULL;
    }
    memcpy(k->values, from->values, from->values_size);
    for (i = 0; i < k->count; i++) {
        k->sizes[i] = from->sizes[i];
        k->pointers[i] = k->values + ((unsigned char *)from->pointers[i] - from->values);
    }
    k->params.kernelParams = k->pointers;
    return k;
}

CUresult cucap_i_kernels_copy(const struct cucap_kernels *list, struct cucap_kernels **out, const char *caller,
                              cucap_error **err)
{
    const struct named_kernel *from;
    struct named_kernel **tail;

    *out = NULL;
    if (!list || !list->first)
        return CUDA_SUCCESS;
    if (!(*out = calloc(1, sizeof **out)))
        return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
    for (tail = &(*out)->first, from = list->first; from; from = from->next, tail = &(*tail)->next)
        if (!(*tail = copy_kernel(from))) {
            cucap_i_kernels_free(*out);
            *out = NULL;
            return cucap_i_fail(err, CUDA_ERROR_OUT_OF_MEMORY, "%s: out of memory", caller);
        }
    return CUDA_SUCCESS;
}

static int same_shape(const struct named_kernel *a, const struct named_kernel *b)
{
    return a->count == b->count && a->values_size == b->values_size &&
           (!a->count || !memcmp(a->sizes, b->sizes, a->count * sizeof *a->sizes));
}

void cucap_i_kernels_updated(struct cucap_kernels *list, const struct cucap_kernels *source)
{
    struct named_kernel *k;

    for (k = list ? list->first : NULL; k; k = k->next) {
        const struct named_kernel *from = find(source, k->name);
        void **pointers = k->pointers;
        if (!from || !same_shape(k, from)) {
            k->stale = 1;
            continue;
        }
        memcpy(k->values, from->values, k->values_size);
        k->params = from->params;   /* the node stays this graph's: the driver knows the executable's nodes by it */
        k->params.kernelParams = pointers;
        k->stale = 0;
    }
}

CUresult cucap_i_kernels_set_arg(struct cucap_kernels *list, CUgraphExec exec, const char *name, unsigned int index,
                                 const void *value, size_t size, const char *caller, cucap_error **err)
{
    struct named_kernel *k;
    void *kept;
    CUresult rc;

    if (!name)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the name is NULL", caller);
    if (!(k = find(list, name)))
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the graph's capture named no kernel \"%s\"", caller,
                            name);
    if (k->stale)
        return cucap_i_fail(err, CUDA_ERROR_ILLEGAL_STATE, "%s: the executable graph was updated from a capture "
                            "that did not name a kernel \"%s\" of the same parameters: its arguments are not known",
                            caller, name);
    if (index >= k->count)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: kernel \"%s\" has %zu parameters; there is no "
                            "parameter %u", caller, name, k->count, index);
    if (size != k->sizes[index])
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: parameter %u of kernel \"%s\" is %zu bytes, not %zu",
                            caller, index, name, k->sizes[index], size);
    if (!value)
        return cucap_i_fail(err, CUDA_ERROR_INVALID_VALUE, "%s: the value is NULL", caller);
    /* the driver copies the arguments at the call: the new one is read
     * where the caller has it, and kept only once the driver took it */
    kept = k->pointers[index];
    k->pointers[index] = (void *)value;
    rc = cucap_i_drv.cuGraphExecKernelNodeSetParams(exec, k->node, &k->params);
    k->pointers[index] = kept;
    if (rc != CUDA_SUCCESS)
        return cucap_i_fail_driver(err, rc, caller, "cuGraphExecKernelNodeSetParams");
    memcpy(kept, value, size);
    return CUDA_SUCCESS;
}
