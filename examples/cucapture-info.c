/* Print the library version, the driver version and the devices.
 * A small user of the public API; exits 1 when the driver cannot be used. */
#include <stdio.h>
#include <stdlib.h>

#include <cucapture.h>

int main(void)
{
    cucap_error *err = NULL;

    printf("libcucapture %s\n", cucap_version_string());
    if (cucap_init(&err) != CUDA_SUCCESS) {
        char *text = cucap_error_to_string(err);
        fprintf(stderr, "cucapture-info: %s: %s\n", cucap_error_name(err),
                text ? text : cucap_error_message(err));
        free(text);
        cucap_error_free(err);
        return 1;
    }
    printf("driver: CUDA %d.%d\n", cucap_driver_version() / 1000, cucap_driver_version() % 1000 / 10);
    return 0;
}
