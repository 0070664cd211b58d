/* Making a context current for the driver calls that need one, and giving
 * the calling thread its own context back afterwards. */
#include "config.h"

#include "driver.h"
#include "internal.h"

CUresult cucap_i_ctx_enter(CUcontext ctx, CUcontext *saved)
{
    CUresult rc = cucap_i_drv.cuCtxGetCurrent(saved);

    if (rc == CUDA_SUCCESS && *saved != ctx)
        rc = cucap_i_drv.cuCtxSetCurrent(ctx);
    return rc;
}

CUresult cucap_i_ctx_leave(CUcontext ctx, CUcontext saved)
{
    return saved == ctx ? CUDA_SUCCESS : cucap_i_drv.cuCtxSetCurrent(saved);
}
