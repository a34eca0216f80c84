#ifndef GLASSES_CSDBUS_SHIM_H
#define GLASSES_CSDBUS_SHIM_H
// sd-bus's types from libsystemd's header; its functions through CLibraryLoader, which
// opens libsystemd.so.0 on first use (only `prefetch --require-unmetered` asks the system
// bus anything; every other command starts without loading it). No logic here.
#include <systemd/sd-bus.h>

/// Why libsystemd could not be loaded (NULL when it was, or was not tried yet).
const char *glasses_sd_bus_load_error(void);

int glasses_sd_bus_open_system(sd_bus **bus);
sd_bus *glasses_sd_bus_flush_close_unref(sd_bus *bus);
int glasses_sd_bus_message_new_method_call(sd_bus *bus, sd_bus_message **m, const char *destination, const char *path,
                                           const char *interface, const char *member);
int glasses_sd_bus_message_set_auto_start(sd_bus_message *m, int b);
int glasses_sd_bus_message_append_basic(sd_bus_message *m, char type, const void *p);
int glasses_sd_bus_call(sd_bus *bus, sd_bus_message *m, uint64_t usec, sd_bus_error *ret_error, sd_bus_message **reply);
int glasses_sd_bus_message_enter_container(sd_bus_message *m, char type, const char *contents);
int glasses_sd_bus_message_read_basic(sd_bus_message *m, char type, void *p);
sd_bus_message *glasses_sd_bus_message_unref(sd_bus_message *m);
void glasses_sd_bus_error_free(sd_bus_error *e);

#endif
