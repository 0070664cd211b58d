/**
 * \file        cucapture.hpp
 * \brief       libcucapture for C++: owning types and exceptions
 *
 * A header-only C++17 layer over the C API of <cucapture.h>, in namespace
 * cucap.  Each function is an inline call of the C function of the same
 * name: it adds no behaviour, state or driver call of its own, so
 * everything the C manual pages say holds here too (see cucapture.hpp(3)).
 * The one exception is builder::capture(): when its callable throws, it
 * gives the capture up (cucap_builder_abandon()) before the exception
 * goes on, so no exception ever leaves a thread capturing.
 *
 *   - builder, exec, graph and pool own the C object and are move-only;
 *     their destructors never throw: they call the C destroy functions,
 *     whose failures go to the warning handler (cucap_set_warning_handler()).
 *     A moved-from object is empty and safe to destroy.
 *   - A failure throws cucap::error, carrying the CUresult, the message and
 *     every note of the C error object; error_code() gives it as a
 *     std::error_code of result_category().
 *   - builder::stream() is the builder's CUstream, which is also a
 *     cudaStream_t: the CUDA runtime, kernels launched with <<<>>> and
 *     libraries such as cuBLAS use it directly.
 *
 * Built like the C API: pkg-config --cflags --libs cucapture, or the CMake
 * target cucapture::cucapture.  Needs C++17.
 */
#ifndef CUCAPTURE_HPP
#define CUCAPTURE_HPP

#include <cucapture.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(__cplusplus) || __cplusplus < 201703L
#  if !defined(_MSVC_LANG) || _MSVC_LANG < 201703L
#    error "cucapture.hpp needs C++17 or newer"
#  endif
#endif

namespace cucap {

/* ---------------------------------------------------------------- errors */

/**
 * \brief       The category of CUresult values in std::error_code
 *
 * name() is "cucapture"; message() the code's symbolic name, as
 * cucap_result_name() gives it ("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED").
 */
class result_category_type final : public std::error_category {
public:
    const char *name() const noexcept override { return "cucapture"; }
    std::string message(int code) const override { return cucap_result_name(static_cast<CUresult>(code)); }
};

/** \brief       The one result_category_type object */
inline const std::error_category &result_category() noexcept
{
    static const result_category_type category;
    return category;
}

/** \brief       A CUresult as a std::error_code of result_category() */
inline std::error_code make_error_code(CUresult code) noexcept
{
    return std::error_code(static_cast<int>(code), result_category());
}

/**
 * \brief       A failed libcucapture call
 *
 * what() is the C error's message ("cucap_builder_end: ..."); notes() its
 * notes, in order; text() the message and the notes as
 * cucap_error_to_string() writes them.
 */
class error : public std::runtime_error {
public:
    /**
     * \brief   Take over the C error e of a call that returned code
     *
     * e is freed.  A NULL e (the library could not make one) gives the
     * code's name as the message.
     */
    static error take(CUresult code, cucap_error *e)
    {
        holder owned(e);
        std::vector<std::string> notes;
        std::string text;

        for (std::size_t i = 0, n = cucap_error_note_count(e); i < n; i++)
            notes.emplace_back(cucap_error_note(e, i));
        if (char *full = cucap_error_to_string(e)) {
            text = full;
            std::free(full);
        }
        std::string message = e ? cucap_error_message(e) : cucap_result_name(code);
        if (text.empty())
            text = message;
        return error(code, message, std::move(notes), std::move(text));
    }

    error(CUresult code, const std::string &message, std::vector<std::string> notes, std::string text)
        : std::runtime_error(message), code_(code), notes_(std::move(notes)), text_(std::move(text))
    {
    }

    /** \brief   The CUresult the C call returned */
    CUresult code() const noexcept { return code_; }
    /** \brief   Its symbolic name, never NULL */
    const char *name() const noexcept { return cucap_result_name(code_); }
    /** \brief   The notes of secondary failures, in order */
    const std::vector<std::string> &notes() const noexcept { return notes_; }
    /** \brief   Message and notes, as cucap_error_to_string() */
    const std::string &text() const noexcept { return text_; }
    /** \brief   code() as a std::error_code */
    std::error_code error_code() const noexcept { return make_error_code(code_); }

private:
    struct holder {
        explicit holder(cucap_error *e) noexcept : e_(e) {}
        ~holder() { cucap_error_free(e_); }
        holder(const holder &) = delete;
        holder &operator=(const holder &) = delete;
        cucap_error *e_;
    };

    CUresult code_;
    std::vector<std::string> notes_;
    std::string text_;
};

namespace detail {

/* The C error slot of one call: freed unless handed to an exception. */
class error_slot {
public:
    error_slot() noexcept = default;
    ~error_slot() { cucap_error_free(e_); }
    error_slot(const error_slot &) = delete;
    error_slot &operator=(const error_slot &) = delete;
    cucap_error **out() noexcept { return &e_; }
    /* for a failure that cannot be thrown (a destructor's) */
    void warn() const noexcept { cucap_warn(e_); }
    /* throw for a failed call */
    void check(CUresult code)
    {
        if (code != CUDA_SUCCESS) {
            cucap_error *e = e_;
            e_ = nullptr;
            throw error::take(code, e);
        }
    }

private:
    cucap_error *e_ = nullptr;
};

} // namespace detail

/* ---------------------------------------------------------------- the library */

/** \brief       cucap_init(): load the driver now (optional; throws on failure) */
inline void init()
{
    detail::error_slot e;
    e.check(cucap_init(e.out()));
}

/** \brief       cucap_version_string() */
inline const char *version_string() noexcept { return cucap_version_string(); }

/** \brief       cucap_driver_version() */
inline int driver_version() noexcept { return cucap_driver_version(); }

/** \brief       cucap_driver_entry_point(): cast to the PFN_..._v12030-or-older type */
inline cucap_driver_fn driver_entry_point(const char *symbol) noexcept { return cucap_driver_entry_point(symbol); }

/** \brief       cucap_result_name() */
inline const char *result_name(CUresult code) noexcept { return cucap_result_name(code); }

/** \brief       cucap_release_cached(): give back what the library keeps
 *              (called alone, with no other call of the library running) */
inline void release_cached() noexcept { cucap_release_cached(); }

/** \brief       cucap_device_graph_memory(): the device's graph memory now (throws on failure) */
inline cucap_graph_memory device_graph_memory(CUdevice dev = 0)
{
    detail::error_slot e;
    cucap_graph_memory m{};
    e.check(cucap_device_graph_memory(dev, &m, e.out()));
    return m;
}

/** \brief       cucap_device_graph_memory_trim() (throws on failure) */
inline void device_graph_memory_trim(CUdevice dev = 0)
{
    detail::error_slot e;
    e.check(cucap_device_graph_memory_trim(dev, e.out()));
}

class builder;
class graph;

/* ---------------------------------------------------------------- exec */

/**
 * \brief       An executable graph (cucap_exec), owned
 */
class exec {
public:
    exec() noexcept = default;
    /** \brief   Adopt a C object */
    explicit exec(cucap_exec *e) noexcept : e_(e) {}
    exec(exec &&other) noexcept : e_(other.release()) {}
    exec &operator=(exec &&other) noexcept
    {
        if (this != &other) {
            cucap_exec_destroy(e_);
            e_ = other.release();
        }
        return *this;
    }
    exec(const exec &) = delete;
    exec &operator=(const exec &) = delete;
    /** \brief   cucap_exec_destroy(); failures go to the warning handler */
    ~exec() { cucap_exec_destroy(e_); }

    /** \brief   cucap_exec_launch() */
    void launch(CUstream s)
    {
        detail::error_slot e;
        e.check(cucap_exec_launch(e_, s, e.out()));
    }
    /**
     * \brief   cucap_exec_launch_params(): launch with these values in the
     *          graph's parameter block
     *
     * T is the struct the capture's block was made for
     * (builder::params<T>()): trivially copyable, and of the block's size
     * (values of another size are refused: cucap::error, INVALID_VALUE).
     */
    template <class T>
    void launch(CUstream s, const T &values)
    {
        static_assert(std::is_trivially_copyable<T>::value, "parameter values are copied as bytes");
        static_assert(!std::is_pointer<T>::value, "launch(s, values) copies the values themselves: for a pointer to "
                                                  "them, call launch(s, pointer, size)");
        detail::error_slot e;
        e.check(cucap_exec_launch_params(e_, &values, sizeof(T), s, e.out()));
    }
    /**
     * \brief   cucap_exec_launch_params(): size bytes at values, for a block
     *          made with builder::params(size)
     */
    void launch(CUstream s, const void *values, std::size_t size)
    {
        detail::error_slot e;
        e.check(cucap_exec_launch_params(e_, values, size, s, e.out()));
    }
    /** \brief   cucap_exec_params_size(): 0 when the graph reads no block */
    std::size_t params_size() const noexcept { return cucap_exec_params_size(e_); }
    /** \brief   cucap_exec_upload() */
    void upload(CUstream s)
    {
        detail::error_slot e;
        e.check(cucap_exec_upload(e_, s, e.out()));
    }
    /** \brief   cucap_exec_update(): take the graph an ENDED builder captured */
    inline void update(builder &source);
    /** \brief   cucap_exec_update_graph(): take an adopted, cloned or shared graph */
    inline void update(const graph &source);
    /**
     * \brief   cucap_exec_set_kernel_arg(): parameter index of the kernel
     *          the capture named name takes value, whose size is checked
     *          against the parameter's
     */
    template <class T>
    void set_kernel_arg(const char *name, unsigned int index, const T &value)
    {
        static_assert(std::is_trivially_copyable<T>::value, "kernel arguments are copied as bytes");
        detail::error_slot e;
        e.check(cucap_exec_set_kernel_arg(e_, name, index, &value, sizeof(T), e.out()));
    }
    /** \brief   cucap_exec_set_memcpy(): the named copy's operands */
    void set_memcpy(const char *name, CUdeviceptr dst, CUdeviceptr src, std::size_t size)
    {
        detail::error_slot e;
        e.check(cucap_exec_set_memcpy(e_, name, dst, src, size, e.out()));
    }
    /** \brief   cucap_exec_set_memset(): the named memset's destination and value */
    void set_memset(const char *name, CUdeviceptr dst, unsigned int value)
    {
        detail::error_slot e;
        e.check(cucap_exec_set_memset(e_, name, dst, value, e.out()));
    }
    /** \brief   cucap_exec_set_host_callback(): fn(data) from the next launch
     *           on; free_data(data) once, on the library's thread, when no
     *           launch can run it any more (at once when this call throws) */
    void set_host_callback(const char *name, CUhostFn fn, void *data, CUhostFn free_data)
    {
        detail::error_slot e;
        e.check(cucap_exec_set_host_callback(e_, name, fn, data, free_data, e.out()));
    }
    /** \brief   cucap_exec_set_child_graph(): the named embedded graph's work
     *           from g, of the same shape */
    inline void set_child_graph(const char *name, const graph &g);
    /** \brief   cucap_exec_set_event(): the event a named record or wait node uses */
    void set_event(const char *name, CUevent event)
    {
        detail::error_slot e;
        e.check(cucap_exec_set_event(e_, name, event, e.out()));
    }
    /** \brief   cucap_exec_set_enabled(): a named kernel, copy or memset runs or not */
    void set_enabled(const char *name, bool enabled)
    {
        detail::error_slot e;
        e.check(cucap_exec_set_enabled(e_, name, enabled ? 1 : 0, e.out()));
    }

    /** \brief   cucap_exec_handle() */
    CUgraphExec handle() const noexcept { return cucap_exec_handle(e_); }
    cucap_exec *get() const noexcept { return e_; }
    /** \brief   Give up ownership: the caller destroys the C object */
    cucap_exec *release() noexcept { return std::exchange(e_, nullptr); }
    explicit operator bool() const noexcept { return e_ != nullptr; }

private:
    cucap_exec *e_ = nullptr;
};

/* ---------------------------------------------------------------- graph */

/**
 * \brief       A reference to a graph hierarchy (cucap_graph), owned
 */
class graph {
public:
    graph() noexcept = default;
    /** \brief   Adopt a C reference */
    explicit graph(cucap_graph *g) noexcept : g_(g) {}
    graph(graph &&other) noexcept : g_(other.release()) {}
    graph &operator=(graph &&other) noexcept
    {
        if (this != &other) {
            cucap_graph_unref(g_);
            g_ = other.release();
        }
        return *this;
    }
    graph(const graph &) = delete;
    graph &operator=(const graph &) = delete;
    /** \brief   cucap_graph_unref() */
    ~graph() { cucap_graph_unref(g_); }

    /** \brief   cucap_graph_adopt(): the library owns a graph built node by node */
    static graph adopt(CUgraph built)
    {
        detail::error_slot e;
        cucap_graph *out = nullptr;
        e.check(cucap_graph_adopt(built, &out, e.out()));
        return graph(out);
    }
    /** \brief   cucap_graph_ref(): another reference to the same hierarchy */
    graph share() const noexcept { return graph(cucap_graph_ref(g_)); }
    /** \brief   cucap_graph_clone(): a copy in a hierarchy of its own */
    graph clone() const
    {
        detail::error_slot e;
        cucap_graph *out = nullptr;
        e.check(cucap_graph_clone(g_, &out, e.out()));
        return graph(out);
    }
    /** \brief   cucap_graph_handle(): borrowed, NULL once retired */
    CUgraph handle() const noexcept { return cucap_graph_handle(g_); }
    /** \brief   cucap_graph_instantiate() */
    exec instantiate(const cucap_complete_options *opts = nullptr) const
    {
        detail::error_slot e;
        cucap_exec *out = nullptr;
        e.check(cucap_graph_instantiate(g_, opts, &out, e.out()));
        return exec(out);
    }

    cucap_graph *get() const noexcept { return g_; }
    cucap_graph *release() noexcept { return std::exchange(g_, nullptr); }
    explicit operator bool() const noexcept { return g_ != nullptr; }

private:
    cucap_graph *g_ = nullptr;
};

/* ---------------------------------------------------------------- builder */

/**
 * \brief       A graph builder (cucap_builder), owned
 *
 * The destructor is cucap_builder_destroy(): any state, any order
 * relative to forks, bodies and graphs, never a crash.
 */
class builder {
public:
    builder() noexcept = default;
    /** \brief   Adopt a C builder */
    explicit builder(cucap_builder *b) noexcept : b_(b) {}
    builder(builder &&other) noexcept : b_(other.release()) {}
    builder &operator=(builder &&other) noexcept
    {
        if (this != &other) {
            cucap_builder_destroy(b_);
            b_ = other.release();
        }
        return *this;
    }
    builder(const builder &) = delete;
    builder &operator=(const builder &) = delete;
    ~builder() { cucap_builder_destroy(b_); }

    /** \brief   cucap_builder_create(): a PRIMARY builder on a new stream of dev */
    static builder create(CUdevice dev = 0)
    {
        detail::error_slot e;
        cucap_builder *b = nullptr;
        e.check(cucap_builder_create(dev, &b, e.out()));
        return builder(b);
    }
    /** \brief   cucap_builder_create_on_stream(): on the caller's stream, borrowed */
    static builder on_stream(CUstream s)
    {
        detail::error_slot e;
        cucap_builder *b = nullptr;
        e.check(cucap_builder_create_on_stream(s, &b, e.out()));
        return builder(b);
    }

    /** \brief   cucap_builder_begin() */
    void begin(CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL)
    {
        detail::error_slot e;
        e.check(cucap_builder_begin(b_, mode, e.out()));
    }
    /** \brief   cucap_builder_end() */
    void end()
    {
        detail::error_slot e;
        e.check(cucap_builder_end(b_, e.out()));
    }
    /**
     * \brief   begin(), fill(*this), end(): a capture filled by a callable
     *
     * When fill throws, the capture is given up before the exception goes
     * on, unchanged (cucap_builder_abandon()): it is ended and its graph
     * discarded, so the thread is no longer capturing and its next CUDA
     * call (a cudaMalloc, say) works; the builder may begin again (a
     * primary after reset(), a body at once).  A failure to end it goes
     * to the warning handler.
     */
    template <class Fill>
    void capture(Fill &&fill, CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL)
    {
        begin(mode);
        try {
            std::forward<Fill>(fill)(*this);
        } catch (...) {
            cucap_builder_abandon(b_);
            throw;
        }
        end();
    }
    /** \brief   cucap_builder_abandon(): end a running capture, discarding its graph */
    void abandon() noexcept { cucap_builder_abandon(b_); }

    /**
     * \brief   cucap_builder_split(): count branches, this one and count - 1 new forks
     * \return  The count - 1 forks, owned.
     */
    std::vector<builder> split(std::size_t count) { return split_with(count, nullptr); }
    /** \brief   cucap_builder_split_on(): the forks' streams on device dev */
    std::vector<builder> split_on(CUdevice dev, std::size_t count) { return split_with(count, &dev); }
    /**
     * \brief   cucap_builder_split_kept(): count - 1 forks that stay this
     *          builder's from one capture to the next
     *
     * kept owns every fork the builder keeps for the caller: this
     * capture's forks are moved to its front in the C call's order, new
     * ones added, the others left after them.  Keep it alive across the
     * captures (its destructors destroy each fork once, when done).
     * \return  Nothing: kept's first count - 1 elements are this capture's forks.
     */
    void split_kept(std::size_t count, std::vector<builder> &kept)
    {
        std::vector<cucap_builder *> raw(count > 1 ? count - 1 : 1, nullptr);
        kept.reserve(kept.size() + raw.size());   /* nothing can throw once the forks are handed out */
        detail::error_slot e;
        e.check(cucap_builder_split_kept(b_, count, raw.data(), e.out()));
        for (std::size_t i = 0; i < raw.size(); ++i) {
            std::size_t j = i;
            while (j < kept.size() && kept[j].get() != raw[i])
                ++j;
            if (j == kept.size())
                kept.emplace_back(raw[i]);
            std::swap(kept[i], kept[j]);
        }
    }
    /** \brief   cucap_builder_wait(): this builder's work from here on waits
     *           for other's so far; both stay open */
    void wait(builder &other)
    {
        detail::error_slot e;
        e.check(cucap_builder_wait(b_, other.b_, e.out()));
    }
    /** \brief   cucap_builder_name_node(): name the node the last work on
     *           this builder's stream made */
    void name_node(const char *name)
    {
        detail::error_slot e;
        e.check(cucap_builder_name_node(b_, name, e.out()));
    }
    /** \brief   cucap_builder_host_callback(): fn(data) at each launch;
     *           free_data(data) once, on the library's thread, when nothing
     *           can run it any more (also when this call throws) */
    void host_callback(CUhostFn fn, void *data, CUhostFn free_data)
    {
        detail::error_slot e;
        e.check(cucap_builder_host_callback(b_, fn, data, free_data, e.out()));
    }
    /** \brief   cucap_builder_join_forks(): join every open fork split from this builder */
    void join_forks()
    {
        detail::error_slot e;
        e.check(cucap_builder_join_forks(b_, e.out()));
    }
    /**
     * \brief   cucap_builder_params(): the capture's parameter block of size bytes
     * \return  Its device address, for the captured work to read.
     */
    CUdeviceptr params(std::size_t size)
    {
        detail::error_slot e;
        CUdeviceptr block = 0;
        e.check(cucap_builder_params(b_, size, &block, e.out()));
        return block;
    }
    /**
     * \brief   cucap_builder_params() for a struct: a block of sizeof(T)
     * \return  A device pointer for kernels to read; launch with
     *          exec::launch(stream, values), values a T.
     */
    template <class T>
    T *params()
    {
        static_assert(std::is_trivially_copyable<T>::value, "parameter values are copied as bytes");
        detail::error_slot e;
        CUdeviceptr block = 0;
        e.check(cucap_builder_params(b_, sizeof(T), &block, e.out()));
        return reinterpret_cast<T *>(static_cast<std::uintptr_t>(block));
    }
    /** \brief   cucap_builder_close(): CLOSED, ending a live capture first */
    void close()
    {
        detail::error_slot e;
        e.check(cucap_builder_close(b_, e.out()));
    }
    /** \brief   cucap_builder_reset(): NOT_STARTED again, the same stream */
    void reset()
    {
        detail::error_slot e;
        e.check(cucap_builder_reset(b_, e.out()));
    }

    /** \brief   cucap_builder_stream(): also a cudaStream_t */
    CUstream stream() const noexcept { return cucap_builder_stream(b_); }
    /** \brief   cucap_builder_context() */
    CUcontext context() const noexcept { return cucap_builder_context(b_); }
    /** \brief   cucap_builder_get_kind() */
    cucap_builder_kind kind() const noexcept { return cucap_builder_get_kind(b_); }
    /** \brief   cucap_builder_get_state() */
    cucap_builder_state state() const noexcept { return cucap_builder_get_state(b_); }
    /** \brief   cucap_builder_is_building() */
    bool is_building() const
    {
        detail::error_slot e;
        int building = 0;
        e.check(cucap_builder_is_building(b_, &building, e.out()));
        return building != 0;
    }

    /**
     * \brief   cucap_builder_enqueue(): run fn(stream) under the capture's lock
     *
     * fn returns a CUresult (the failing driver call's) or nothing.  An
     * exception from fn comes back out of enqueue() (the C call sees
     * CUDA_ERROR_UNKNOWN from it).
     */
    template <class Fn>
    void enqueue(Fn &&fn)
    {
        struct call {
            std::remove_reference_t<Fn> *fn;
            std::exception_ptr thrown;
        } c{&fn, nullptr};
        cucap_enqueue_fn trampoline = [](CUstream s, void *p) noexcept -> CUresult {
            call *c = static_cast<call *>(p);
            try {
                if constexpr (std::is_void_v<std::invoke_result_t<std::remove_reference_t<Fn> &, CUstream>>) {
                    (*c->fn)(s);
                    return CUDA_SUCCESS;
                } else {
                    return static_cast<CUresult>((*c->fn)(s));
                }
            } catch (...) {
                c->thrown = std::current_exception();
                return CUDA_ERROR_UNKNOWN;
            }
        };
        detail::error_slot e;
        CUresult rc = cucap_builder_enqueue(b_, trampoline, &c, e.out());
        if (c.thrown)
            std::rethrow_exception(c.thrown);
        e.check(rc);
    }

    /** \brief   cucap_builder_complete(): instantiate the ENDED builder's graph */
    exec complete(const cucap_complete_options *opts = nullptr)
    {
        detail::error_slot e;
        cucap_exec *out = nullptr;
        e.check(cucap_builder_complete(b_, opts, &out, e.out()));
        return exec(out);
    }
    /** \brief   cucap_builder_complete_into(): update target from the ENDED
     *           builder's graph, or instantiate it anew (an empty target
     *           too); says which */
    cucap_completion complete_into(exec &target, const cucap_complete_options *opts = nullptr)
    {
        detail::error_slot e;
        cucap_exec *current = target.get();
        cucap_completion how = CUCAP_COMPLETED_UPDATED;
        e.check(cucap_builder_complete_into(b_, opts, &current, &how, e.out()));
        if (current != target.get()) {   /* the C call destroyed the old one */
            (void)target.release();
            target = exec(current);
        }
        return how;
    }
    /** \brief   cucap_builder_complete_into_why(): the same, with the
     *           driver's reason in *why when it refused the update */
    cucap_completion complete_into(exec &target, cucap_update_refusal *why,
                                   const cucap_complete_options *opts = nullptr)
    {
        detail::error_slot e;
        cucap_exec *current = target.get();
        cucap_completion how = CUCAP_COMPLETED_UPDATED;
        e.check(cucap_builder_complete_into_why(b_, opts, &current, &how, why, e.out()));
        if (current != target.get()) {
            (void)target.release();
            target = exec(current);
        }
        return how;
    }
    /** \brief   cucap_builder_graph(): a reference to the ENDED builder's graph */
    graph graph_ref()
    {
        detail::error_slot e;
        cucap_graph *out = nullptr;
        e.check(cucap_builder_graph(b_, &out, e.out()));
        return graph(out);
    }
    /** \brief   cucap_builder_dot_print() */
    void dot_print(const char *path, unsigned int flags = 0)
    {
        detail::error_slot e;
        e.check(cucap_builder_dot_print(b_, path, flags, e.out()));
    }
    /** \brief   cucap_builder_embed(): child's graph as a child-graph node here */
    void embed(builder &child)
    {
        detail::error_slot e;
        e.check(cucap_builder_embed(b_, child.b_, e.out()));
    }

    /** \brief   cucap_builder_create_condition() */
    CUgraphConditionalHandle create_condition(unsigned int default_value = 0, bool assign_default = true)
    {
        detail::error_slot e;
        CUgraphConditionalHandle c = 0;
        e.check(cucap_builder_create_condition(b_, default_value, assign_default ? 1 : 0, &c, e.out()));
        return c;
    }
    /** \brief   cucap_builder_if(): an IF node; its body, NOT_STARTED */
    builder if_then(CUgraphConditionalHandle c)
    {
        detail::error_slot e;
        cucap_builder *body = nullptr;
        e.check(cucap_builder_if(b_, c, &body, e.out()));
        return builder(body);
    }
    /** \brief   cucap_builder_if_else(): then and else bodies */
    std::pair<builder, builder> if_else(CUgraphConditionalHandle c)
    {
        detail::error_slot e;
        cucap_builder *then_body = nullptr, *else_body = nullptr;
        e.check(cucap_builder_if_else(b_, c, &then_body, &else_body, e.out()));
        return {builder(then_body), builder(else_body)};
    }
    /** \brief   cucap_builder_while(): a WHILE node; its body */
    builder while_loop(CUgraphConditionalHandle c)
    {
        detail::error_slot e;
        cucap_builder *body = nullptr;
        e.check(cucap_builder_while(b_, c, &body, e.out()));
        return builder(body);
    }
    /** \brief   cucap_builder_switch(): a SWITCH node of count bodies */
    std::vector<builder> switch_on(CUgraphConditionalHandle c, std::size_t count)
    {
        std::vector<cucap_builder *> raw(count, nullptr);
        std::vector<builder> bodies;
        bodies.reserve(count);
        detail::error_slot e;
        e.check(cucap_builder_switch(b_, c, count, raw.data(), e.out()));
        for (cucap_builder *body : raw)
            bodies.emplace_back(body);
        return bodies;
    }

    cucap_builder *get() const noexcept { return b_; }
    /** \brief   Give up ownership: the caller destroys the C builder */
    cucap_builder *release() noexcept { return std::exchange(b_, nullptr); }
    explicit operator bool() const noexcept { return b_ != nullptr; }

private:
    std::vector<builder> split_with(std::size_t count, const CUdevice *dev)
    {
        std::vector<cucap_builder *> raw(count > 1 ? count - 1 : 1, nullptr);
        std::vector<builder> forks;
        forks.reserve(raw.size());   /* nothing can throw once the forks exist */
        detail::error_slot e;
        e.check(dev ? cucap_builder_split_on(b_, *dev, count, raw.data(), e.out())
                    : cucap_builder_split(b_, count, raw.data(), e.out()));
        for (cucap_builder *f : raw)
            forks.emplace_back(f);
        return forks;
    }

    cucap_builder *b_ = nullptr;
};

inline void exec::update(builder &source)
{
    detail::error_slot e;
    e.check(cucap_exec_update(e_, source.get(), e.out()));
}

inline void exec::update(const graph &source)
{
    detail::error_slot e;
    e.check(cucap_exec_update_graph(e_, source.get(), e.out()));
}

inline void exec::set_child_graph(const char *name, const graph &g)
{
    detail::error_slot e;
    e.check(cucap_exec_set_child_graph(e_, name, g.get(), e.out()));
}

namespace detail {

inline cucap_builder *raw(builder &b) noexcept { return b.get(); }
inline cucap_builder *raw(builder *b) noexcept { return b ? b->get() : nullptr; }
inline cucap_builder *raw(std::reference_wrapper<builder> b) noexcept { return b.get().get(); }

inline builder &deref(builder &b) noexcept { return b; }
inline builder &deref(builder *b) noexcept { return *b; }
inline builder &deref(std::reference_wrapper<builder> b) noexcept { return b.get(); }

} // namespace detail

/**
 * \brief       cucap_builder_join() over any range of builders
 *
 * The elements are builders, pointers to builders or
 * std::reference_wrapper<builder> (for example a std::vector<builder>
 * from split() with the primary added, or {std::ref(a), std::ref(b)}).
 * Every builder but the root is CLOSED afterwards, and still owned by its
 * object.
 * \return      The root: the builder the others were joined into.
 */
template <class Range>
builder &join(Range &&builders)
{
    std::vector<cucap_builder *> raw;
    for (auto &&b : builders)
        raw.push_back(detail::raw(b));
    detail::error_slot e;
    cucap_builder *root = nullptr;
    e.check(cucap_builder_join(raw.data(), raw.size(), &root, e.out()));
    for (auto &&b : builders)
        if (detail::raw(b) == root)
            return detail::deref(b);
    throw error(CUDA_ERROR_UNKNOWN, "cucap::join: the root is none of the builders", {},
                "cucap::join: the root is none of the builders");
}

/** \brief       join() of a braced list: cucap::join({std::ref(a), std::ref(b)}) */
inline builder &join(std::initializer_list<std::reference_wrapper<builder>> builders)
{
    return join<std::initializer_list<std::reference_wrapper<builder>> &>(builders);
}

/* ---------------------------------------------------------------- relaxed capture mode */

/**
 * \brief       The calling thread in relaxed capture mode for the object's life
 *
 * cucap_relaxed_mode_enter() in the constructor (which throws on
 * failure), cucap_relaxed_mode_leave() in the destructor (a failure goes
 * to the warning handler).  For a thread's own waits and synchronous calls
 * while other threads capture in global mode:
 *
 *     {
 *         cucap::relaxed_mode relaxed;
 *         cudaStreamSynchronize(my_stream);   // invalidates no capture
 *     }
 *
 * Nestable; neither copied nor moved, so scopes end in reverse order on
 * the thread that began them, as the C scope requires.  See
 * <cucapture/relaxed.h> for the rules it relies on, and what it does on a
 * thread that is itself capturing in global mode.
 */
class relaxed_mode {
public:
    relaxed_mode()
    {
        detail::error_slot e;
        e.check(cucap_relaxed_mode_enter(&scope_, e.out()));
    }
    ~relaxed_mode()
    {
        detail::error_slot e;
        if (cucap_relaxed_mode_leave(&scope_, e.out()) != CUDA_SUCCESS)
            e.warn();
    }
    relaxed_mode(const relaxed_mode &) = delete;
    relaxed_mode &operator=(const relaxed_mode &) = delete;

private:
    cucap_relaxed_mode scope_;
};

/* ---------------------------------------------------------------- pool */

/**
 * \brief       A memory pool object (cucap_pool), owned
 *
 * The destructor is cucap_pool_destroy(): an owned pool is destroyed, a
 * wrapped one loses its wrapper, the process-wide device pool is left as
 * it is; failures go to the warning handler.
 */
class pool {
public:
    pool() noexcept = default;
    /** \brief   Adopt a C pool object */
    explicit pool(cucap_pool *p) noexcept : p_(p) {}
    pool(pool &&other) noexcept : p_(other.release()) {}
    pool &operator=(pool &&other) noexcept
    {
        if (this != &other) {
            cucap_pool_destroy(p_);
            p_ = other.release();
        }
        return *this;
    }
    pool(const pool &) = delete;
    pool &operator=(const pool &) = delete;
    ~pool() { cucap_pool_destroy(p_); }

    /** \brief   cucap_pool_open_default(): the device's current pool, wrapped */
    static pool open_default(CUdevice dev = 0)
    {
        detail::error_slot e;
        cucap_pool *p = nullptr;
        e.check(cucap_pool_open_default(dev, &p, e.out()));
        return pool(p);
    }
    /** \brief   cucap_device_pool(): the process-wide object, borrowed */
    static pool device(CUdevice dev = 0)
    {
        detail::error_slot e;
        cucap_pool *p = nullptr;
        e.check(cucap_device_pool(dev, &p, e.out()));
        return pool(p);
    }
    /** \brief   cucap_pool_create(): a new pool, owned */
    static pool create(CUdevice dev = 0, const cucap_pool_options *opts = nullptr)
    {
        detail::error_slot e;
        cucap_pool *p = nullptr;
        e.check(cucap_pool_create(dev, opts, &p, e.out()));
        return pool(p);
    }

    /** \brief   cucap_pool_alloc(): stream-ordered, also inside a capture */
    CUdeviceptr alloc(std::size_t size, CUstream s)
    {
        detail::error_slot e;
        CUdeviceptr ptr = 0;
        e.check(cucap_pool_alloc(p_, size, s, &ptr, e.out()));
        return ptr;
    }
    /**
     * \brief   cucap_pool_alloc() of count elements of T, typed: a count
     *          whose bytes do not fit in size_t asks for SIZE_MAX bytes,
     *          which the driver refuses
     */
    template <class T>
    T *alloc(std::size_t count, CUstream s)
    {
        detail::error_slot e;
        CUdeviceptr ptr = 0;
        std::size_t bytes = count > SIZE_MAX / sizeof(T) ? SIZE_MAX : count * sizeof(T);
        e.check(cucap_pool_alloc(p_, bytes, s, &ptr, e.out()));
        return reinterpret_cast<T *>(static_cast<std::uintptr_t>(ptr));
    }
    /** \brief   cucap_pool_free(): stream-ordered */
    void free(CUdeviceptr ptr, CUstream s)
    {
        detail::error_slot e;
        e.check(cucap_pool_free(p_, ptr, s, e.out()));
    }
    /** \brief   cucap_pool_free() of what alloc<T>() returned */
    template <class T>
    void free(T *ptr, CUstream s)
    {
        detail::error_slot e;
        e.check(cucap_pool_free(p_, static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(ptr)), s, e.out()));
    }
    /** \brief   cucap_pool_close(), reporting a failure; the object is empty after it */
    void close()
    {
        detail::error_slot e;
        e.check(cucap_pool_close(release(), e.out()));
    }

    /** \brief   cucap_pool_handle() */
    CUmemoryPool handle() const noexcept { return cucap_pool_handle(p_); }
    cucap_pool *get() const noexcept { return p_; }
    cucap_pool *release() noexcept { return std::exchange(p_, nullptr); }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    cucap_pool *p_ = nullptr;
};

/* ---------------------------------------------------------------- graph set */

/**
 * \brief       A keyed set of executable graphs (cucap_graph_set), owned
 *
 * run(key, fn, values, stream) with any callable fn(cucap::builder &):
 * the builder is the set's (fn must not keep it); an exception fn throws
 * leaves no capture behind and comes out of run unchanged, after the set
 * tried the step eagerly too.
 */
class graph_set {
public:
    graph_set() noexcept = default;
    /** \brief   Adopt a C set */
    explicit graph_set(cucap_graph_set *set) noexcept : s_(set) {}
    graph_set(graph_set &&other) noexcept : s_(other.release()) {}
    graph_set &operator=(graph_set &&other) noexcept
    {
        if (this != &other) {
            cucap_graph_set_destroy(s_);
            s_ = other.release();
        }
        return *this;
    }
    graph_set(const graph_set &) = delete;
    graph_set &operator=(const graph_set &) = delete;
    /** \brief   cucap_graph_set_destroy() */
    ~graph_set() { cucap_graph_set_destroy(s_); }

    /** \brief   cucap_graph_set_create() */
    static graph_set create(CUdevice dev, const cucap_graph_set_options &opts)
    {
        detail::error_slot e;
        cucap_graph_set *out = nullptr;
        e.check(cucap_graph_set_create(dev, &opts, &out, e.out()));
        return graph_set(out);
    }

    /** \brief   cucap_graph_set_run() with the bytes of key (trivially
     *           copyable), no values */
    template <class Key, class Fn>
    cucap_run_kind run(const Key &key, Fn &&fn, CUstream s)
    {
        return run_bytes(&key, sizeof(Key), std::forward<Fn>(fn), nullptr, 0, s);
    }
    /** \brief   cucap_graph_set_run() with values for the key's parameter
     *           block (builder::params<Values>() in fn) */
    template <class Key, class Fn, class Values>
    cucap_run_kind run(const Key &key, Fn &&fn, const Values &values, CUstream s)
    {
        static_assert(std::is_trivially_copyable<Values>::value, "parameter values are copied as bytes");
        return run_bytes(&key, sizeof(Key), std::forward<Fn>(fn), &values, sizeof(Values), s);
    }

    /** \brief   cucap_graph_set_warm(): capture and instantiate each key
     *           (trivially copyable) ahead of its first run, with fn; the
     *           first exception fn throws is thrown again once the call
     *           returns (its key keeps the reason, as a failed capture) */
    template <class Key, class Fn>
    void warm(const std::vector<Key> &keys, Fn &&fn)
    {
        static_assert(std::is_trivially_copyable<Key>::value, "a key is its bytes");
        static_assert(std::is_invocable<std::remove_reference_t<Fn> &, builder &>::value,
                      "the capture function takes a cucap::builder &");
        call<Fn> c{&fn, nullptr};
        std::vector<const void *> key_ptrs;
        std::vector<std::size_t> sizes(keys.size(), sizeof(Key));
        std::vector<void *> data(keys.size(), &c);
        for (const Key &k : keys)
            key_ptrs.push_back(&k);
        detail::error_slot e;
        CUresult rc = cucap_graph_set_warm(s_, key_ptrs.data(), sizes.data(), keys.size(), &call<Fn>::trampoline,
                                           data.data(), e.out());
        if (c.thrown)
            std::rethrow_exception(c.thrown);
        e.check(rc);
    }

    /** \brief   cucap_graph_set_get_stats() */
    cucap_graph_set_stats stats() const noexcept
    {
        cucap_graph_set_stats out;
        cucap_graph_set_get_stats(s_, &out);
        return out;
    }
    /** \brief   cucap_graph_set_get_key_stats() */
    template <class Key>
    cucap_graph_set_key_stats key_stats(const Key &key) const
    {
        static_assert(std::is_trivially_copyable<Key>::value, "a key is its bytes");
        detail::error_slot e;
        cucap_graph_set_key_stats out;
        e.check(cucap_graph_set_get_key_stats(s_, &key, sizeof(Key), &out, e.out()));
        return out;
    }

    cucap_graph_set *get() const noexcept { return s_; }
    cucap_graph_set *release() noexcept { return std::exchange(s_, nullptr); }
    explicit operator bool() const noexcept { return s_ != nullptr; }

private:
    /* A C++ capture function behind cucap_capture_fn: the first exception
     * it throws is kept for the caller, and fails the capture. */
    template <class Fn>
    struct call {
        std::remove_reference_t<Fn> *fn;
        std::exception_ptr thrown;

        static CUresult trampoline(cucap_builder *raw, void *p, cucap_error **) noexcept
        {
            call *c = static_cast<call *>(p);
            builder b(raw);   /* the set's: released, never destroyed, here */
            CUresult rc = CUDA_SUCCESS;
            try {
                (*c->fn)(b);
            } catch (...) {
                if (!c->thrown)
                    c->thrown = std::current_exception();
                rc = CUDA_ERROR_UNKNOWN;
            }
            (void)b.release();
            return rc;
        }
    };

    template <class Fn>
    cucap_run_kind run_bytes(const void *key, std::size_t key_size, Fn &&fn, const void *values,
                             std::size_t values_size, CUstream s)
    {
        static_assert(std::is_invocable<std::remove_reference_t<Fn> &, builder &>::value,
                      "the capture function takes a cucap::builder &");
        call<Fn> c{&fn, nullptr};
        detail::error_slot e;
        cucap_run_kind kind = CUCAP_RUN_LAUNCHED;
        CUresult rc = cucap_graph_set_run(s_, key, key_size, &call<Fn>::trampoline, &c, values, values_size, s, &kind,
                                          e.out());
        if (rc != CUDA_SUCCESS && c.thrown)
            std::rethrow_exception(c.thrown);
        e.check(rc);
        return kind;
    }

    cucap_graph_set *s_ = nullptr;
};

} // namespace cucap

#endif /* CUCAPTURE_HPP */
